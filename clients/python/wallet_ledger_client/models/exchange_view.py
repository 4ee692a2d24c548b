from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="ExchangeView")


@_attrs_define
class ExchangeView:
    """An exchange, or the reversal of one: what it moved in each currency, and at which rate.

    Attributes:
        rate (str): Units of `counter_currency` one unit of the transaction's `currency` buys (major
            units), as a decimal string: the caller's rate, or the one its two amounts imply.
        amount (int): What moved in the transaction's `currency` (debited from the source wallet; by a
            reversal, credited back), in its minor units.
        amount_decimal (str):
        counter_currency (str):
        counter_amount (int): What moved in `counter_currency` (credited to the counter wallet; by a reversal,
            debited back), in its minor units.
        counter_amount_decimal (str):
    """

    rate: str
    amount: int
    amount_decimal: str
    counter_currency: str
    counter_amount: int
    counter_amount_decimal: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        rate = self.rate

        amount = self.amount

        amount_decimal = self.amount_decimal

        counter_currency = self.counter_currency

        counter_amount = self.counter_amount

        counter_amount_decimal = self.counter_amount_decimal

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "rate": rate,
                "amount": amount,
                "amount_decimal": amount_decimal,
                "counter_currency": counter_currency,
                "counter_amount": counter_amount,
                "counter_amount_decimal": counter_amount_decimal,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        rate = d.pop("rate")

        amount = d.pop("amount")

        amount_decimal = d.pop("amount_decimal")

        counter_currency = d.pop("counter_currency")

        counter_amount = d.pop("counter_amount")

        counter_amount_decimal = d.pop("counter_amount_decimal")

        exchange_view = cls(
            rate=rate,
            amount=amount,
            amount_decimal=amount_decimal,
            counter_currency=counter_currency,
            counter_amount=counter_amount,
            counter_amount_decimal=counter_amount_decimal,
        )

        exchange_view.additional_properties = d
        return exchange_view

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
