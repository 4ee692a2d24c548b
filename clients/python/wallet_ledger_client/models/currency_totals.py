from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="CurrencyTotals")


@_attrs_define
class CurrencyTotals:
    """
    Attributes:
        currency (str):
        gross (str):
        fee (str):
        net (str):
        gross_minor (int | None | Unset):
        fee_minor (int | None | Unset):
        net_minor (int | None | Unset):
    """

    currency: str
    gross: str
    fee: str
    net: str
    gross_minor: int | None | Unset = UNSET
    fee_minor: int | None | Unset = UNSET
    net_minor: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        currency = self.currency

        gross = self.gross

        fee = self.fee

        net = self.net

        gross_minor: int | None | Unset
        if isinstance(self.gross_minor, Unset):
            gross_minor = UNSET
        else:
            gross_minor = self.gross_minor

        fee_minor: int | None | Unset
        if isinstance(self.fee_minor, Unset):
            fee_minor = UNSET
        else:
            fee_minor = self.fee_minor

        net_minor: int | None | Unset
        if isinstance(self.net_minor, Unset):
            net_minor = UNSET
        else:
            net_minor = self.net_minor

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "currency": currency,
                "gross": gross,
                "fee": fee,
                "net": net,
            }
        )
        if gross_minor is not UNSET:
            field_dict["gross_minor"] = gross_minor
        if fee_minor is not UNSET:
            field_dict["fee_minor"] = fee_minor
        if net_minor is not UNSET:
            field_dict["net_minor"] = net_minor

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        currency = d.pop("currency")

        gross = d.pop("gross")

        fee = d.pop("fee")

        net = d.pop("net")

        def _parse_gross_minor(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        gross_minor = _parse_gross_minor(d.pop("gross_minor", UNSET))

        def _parse_fee_minor(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        fee_minor = _parse_fee_minor(d.pop("fee_minor", UNSET))

        def _parse_net_minor(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        net_minor = _parse_net_minor(d.pop("net_minor", UNSET))

        currency_totals = cls(
            currency=currency,
            gross=gross,
            fee=fee,
            net=net,
            gross_minor=gross_minor,
            fee_minor=fee_minor,
            net_minor=net_minor,
        )

        currency_totals.additional_properties = d
        return currency_totals

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
