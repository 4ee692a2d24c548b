from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="EntryRequest")


@_attrs_define
class EntryRequest:
    """
    Attributes:
        account (str):
        amount (int): Signed minor units: positive credits the account, negative debits it. Not zero.
    """

    account: str
    amount: int

    def to_dict(self) -> dict[str, Any]:
        account = self.account

        amount = self.amount

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "account": account,
                "amount": amount,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        account = d.pop("account")

        amount = d.pop("amount")

        entry_request = cls(
            account=account,
            amount=amount,
        )

        return entry_request
