from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.feed_state import FeedState
from ..models.ready import Ready
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.database_readiness import DatabaseReadiness


T = TypeVar("T", bound="Readiness")


@_attrs_define
class Readiness:
    """The body of `/readyz` when ready.

    Attributes:
        status (Ready):
        database (DatabaseReadiness):
        events_stream (FeedState | None | Unset):
    """

    status: Ready
    database: DatabaseReadiness
    events_stream: FeedState | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        status = self.status.value

        database = self.database.to_dict()

        events_stream: None | str | Unset
        if isinstance(self.events_stream, Unset):
            events_stream = UNSET
        elif isinstance(self.events_stream, FeedState):
            events_stream = self.events_stream.value
        else:
            events_stream = self.events_stream

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "status": status,
                "database": database,
            }
        )
        if events_stream is not UNSET:
            field_dict["events_stream"] = events_stream

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.database_readiness import DatabaseReadiness  # noqa: PLC0415

        d = dict(src_dict)
        status = Ready(d.pop("status"))

        database = DatabaseReadiness.from_dict(d.pop("database"))

        def _parse_events_stream(data: object) -> FeedState | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                events_stream_type_0 = FeedState(data)

                return events_stream_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(FeedState | None | Unset, data)

        events_stream = _parse_events_stream(d.pop("events_stream", UNSET))

        readiness = cls(
            status=status,
            database=database,
            events_stream=events_stream,
        )

        readiness.additional_properties = d
        return readiness

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
