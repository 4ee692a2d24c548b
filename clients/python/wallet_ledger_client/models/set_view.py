from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.balances_view import BalancesView
    from ..models.metadata import Metadata


T = TypeVar("T", bound="SetView")


@_attrs_define
class SetView:
    """A set as the API shows it.

    Attributes:
        id (str):
        currency (str):
        metadata (Metadata): Any JSON object, stored and returned as sent.
        balances (BalancesView):
        created_at (datetime.datetime):
        as_of (datetime.datetime | None | Unset): The moment these balances describe, when `as_of` was asked (see the
            account's).
    """

    id: str
    currency: str
    metadata: Metadata
    balances: BalancesView
    created_at: datetime.datetime
    as_of: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        currency = self.currency

        metadata = self.metadata.to_dict()

        balances = self.balances.to_dict()

        created_at = self.created_at.isoformat()

        as_of: None | str | Unset
        if isinstance(self.as_of, Unset):
            as_of = UNSET
        elif isinstance(self.as_of, datetime.datetime):
            as_of = self.as_of.isoformat()
        else:
            as_of = self.as_of

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "currency": currency,
                "metadata": metadata,
                "balances": balances,
                "created_at": created_at,
            }
        )
        if as_of is not UNSET:
            field_dict["as_of"] = as_of

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.balances_view import BalancesView  # noqa: PLC0415
        from ..models.metadata import Metadata  # noqa: PLC0415

        d = dict(src_dict)
        id = d.pop("id")

        currency = d.pop("currency")

        metadata = Metadata.from_dict(d.pop("metadata"))

        balances = BalancesView.from_dict(d.pop("balances"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        def _parse_as_of(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                as_of_type_0 = datetime.datetime.fromisoformat(data)

                return as_of_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        as_of = _parse_as_of(d.pop("as_of", UNSET))

        set_view = cls(
            id=id,
            currency=currency,
            metadata=metadata,
            balances=balances,
            created_at=created_at,
            as_of=as_of,
        )

        set_view.additional_properties = d
        return set_view

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
