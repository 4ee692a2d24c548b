from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.summary import Summary


T = TypeVar("T", bound="RunSummary")


@_attrs_define
class RunSummary:
    """A run as listed: what it compared and what it found, without the detail.

    Attributes:
        id (UUID):
        provider (str):
        clean (bool):
        created_at (datetime.datetime):
        summary (None | Summary | Unset):
    """

    id: UUID
    provider: str
    clean: bool
    created_at: datetime.datetime
    summary: None | Summary | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.summary import Summary  # noqa: PLC0415

        id = str(self.id)

        provider = self.provider

        clean = self.clean

        created_at = self.created_at.isoformat()

        summary: dict[str, Any] | None | Unset
        if isinstance(self.summary, Unset):
            summary = UNSET
        elif isinstance(self.summary, Summary):
            summary = self.summary.to_dict()
        else:
            summary = self.summary

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "provider": provider,
                "clean": clean,
                "created_at": created_at,
            }
        )
        if summary is not UNSET:
            field_dict["summary"] = summary

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.summary import Summary  # noqa: PLC0415

        d = dict(src_dict)
        id = UUID(d.pop("id"))

        provider = d.pop("provider")

        clean = d.pop("clean")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        def _parse_summary(data: object) -> None | Summary | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                summary_type_0 = Summary.from_dict(data)

                return summary_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Summary | Unset, data)

        summary = _parse_summary(d.pop("summary", UNSET))

        run_summary = cls(
            id=id,
            provider=provider,
            clean=clean,
            created_at=created_at,
            summary=summary,
        )

        run_summary.additional_properties = d
        return run_summary

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
