from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.currency_code import CurrencyCode

T = TypeVar("T", bound="VolumeBucket")


@_attrs_define
class VolumeBucket:
    """
    Attributes:
        start (datetime.datetime):
        currency (CurrencyCode): An ISO 4217 code the ledger knows.
        posted_count (int): Transactions posted in the bucket (by ledger time), of every kind: captures, reversals,
            and exchanges (in the currency they debit).
        posted_amount (int): What they moved: a transaction's captured amount, else the sum of its credits in this
            currency.
        posted_amount_decimal (str):
        refused_count (int): Creates refused in the bucket (stored refusals: `insufficient_funds`, ...).
    """

    start: datetime.datetime
    currency: CurrencyCode
    posted_count: int
    posted_amount: int
    posted_amount_decimal: str
    refused_count: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        start = self.start.isoformat()

        currency = self.currency.value

        posted_count = self.posted_count

        posted_amount = self.posted_amount

        posted_amount_decimal = self.posted_amount_decimal

        refused_count = self.refused_count

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "start": start,
                "currency": currency,
                "posted_count": posted_count,
                "posted_amount": posted_amount,
                "posted_amount_decimal": posted_amount_decimal,
                "refused_count": refused_count,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        start = datetime.datetime.fromisoformat(d.pop("start"))

        currency = CurrencyCode(d.pop("currency"))

        posted_count = d.pop("posted_count")

        posted_amount = d.pop("posted_amount")

        posted_amount_decimal = d.pop("posted_amount_decimal")

        refused_count = d.pop("refused_count")

        volume_bucket = cls(
            start=start,
            currency=currency,
            posted_count=posted_count,
            posted_amount=posted_amount,
            posted_amount_decimal=posted_amount_decimal,
            refused_count=refused_count,
        )

        volume_bucket.additional_properties = d
        return volume_bucket

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
