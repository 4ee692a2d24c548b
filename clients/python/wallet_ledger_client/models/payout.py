from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="Payout")


@_attrs_define
class Payout:
    """Lines of the file that share a `payout_ref`: one bank payout.

    Attributes:
        payout_ref (str):
        currency (str):
        lines (int):
        gross (str):
        fee (str):
        net (str):
        ledger_gross (str): The ledger's amount for the payments in this payout that it knows.
        agrees (bool): Whether the payout's gross equals the ledger's for its payments.
        gross_minor (int | None | Unset):
        fee_minor (int | None | Unset):
        net_minor (int | None | Unset):
        ledger_gross_minor (int | None | Unset):
    """

    payout_ref: str
    currency: str
    lines: int
    gross: str
    fee: str
    net: str
    ledger_gross: str
    agrees: bool
    gross_minor: int | None | Unset = UNSET
    fee_minor: int | None | Unset = UNSET
    net_minor: int | None | Unset = UNSET
    ledger_gross_minor: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        payout_ref = self.payout_ref

        currency = self.currency

        lines = self.lines

        gross = self.gross

        fee = self.fee

        net = self.net

        ledger_gross = self.ledger_gross

        agrees = self.agrees

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

        ledger_gross_minor: int | None | Unset
        if isinstance(self.ledger_gross_minor, Unset):
            ledger_gross_minor = UNSET
        else:
            ledger_gross_minor = self.ledger_gross_minor

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "payout_ref": payout_ref,
                "currency": currency,
                "lines": lines,
                "gross": gross,
                "fee": fee,
                "net": net,
                "ledger_gross": ledger_gross,
                "agrees": agrees,
            }
        )
        if gross_minor is not UNSET:
            field_dict["gross_minor"] = gross_minor
        if fee_minor is not UNSET:
            field_dict["fee_minor"] = fee_minor
        if net_minor is not UNSET:
            field_dict["net_minor"] = net_minor
        if ledger_gross_minor is not UNSET:
            field_dict["ledger_gross_minor"] = ledger_gross_minor

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        payout_ref = d.pop("payout_ref")

        currency = d.pop("currency")

        lines = d.pop("lines")

        gross = d.pop("gross")

        fee = d.pop("fee")

        net = d.pop("net")

        ledger_gross = d.pop("ledger_gross")

        agrees = d.pop("agrees")

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

        def _parse_ledger_gross_minor(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        ledger_gross_minor = _parse_ledger_gross_minor(d.pop("ledger_gross_minor", UNSET))

        payout = cls(
            payout_ref=payout_ref,
            currency=currency,
            lines=lines,
            gross=gross,
            fee=fee,
            net=net,
            ledger_gross=ledger_gross,
            agrees=agrees,
            gross_minor=gross_minor,
            fee_minor=fee_minor,
            net_minor=net_minor,
            ledger_gross_minor=ledger_gross_minor,
        )

        payout.additional_properties = d
        return payout

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
