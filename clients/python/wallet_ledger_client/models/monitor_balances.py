from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="MonitorBalances")


@_attrs_define
class MonitorBalances:
    """Balances as monitors and their events show them: `available` spelled out, each amount with
    its `_decimal` form, like every amount.

        Attributes:
            posted (int):
            posted_decimal (str):
            pending_in (int):
            pending_in_decimal (str):
            pending_out (int):
            pending_out_decimal (str):
            available (int): `posted − pending_out`.
            available_decimal (str):
    """

    posted: int
    posted_decimal: str
    pending_in: int
    pending_in_decimal: str
    pending_out: int
    pending_out_decimal: str
    available: int
    available_decimal: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        posted = self.posted

        posted_decimal = self.posted_decimal

        pending_in = self.pending_in

        pending_in_decimal = self.pending_in_decimal

        pending_out = self.pending_out

        pending_out_decimal = self.pending_out_decimal

        available = self.available

        available_decimal = self.available_decimal

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "posted": posted,
                "posted_decimal": posted_decimal,
                "pending_in": pending_in,
                "pending_in_decimal": pending_in_decimal,
                "pending_out": pending_out,
                "pending_out_decimal": pending_out_decimal,
                "available": available,
                "available_decimal": available_decimal,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        posted = d.pop("posted")

        posted_decimal = d.pop("posted_decimal")

        pending_in = d.pop("pending_in")

        pending_in_decimal = d.pop("pending_in_decimal")

        pending_out = d.pop("pending_out")

        pending_out_decimal = d.pop("pending_out_decimal")

        available = d.pop("available")

        available_decimal = d.pop("available_decimal")

        monitor_balances = cls(
            posted=posted,
            posted_decimal=posted_decimal,
            pending_in=pending_in,
            pending_in_decimal=pending_in_decimal,
            pending_out=pending_out,
            pending_out_decimal=pending_out_decimal,
            available=available,
            available_decimal=available_decimal,
        )

        monitor_balances.additional_properties = d
        return monitor_balances

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
