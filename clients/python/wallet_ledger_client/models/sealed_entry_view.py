from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="SealedEntryView")


@_attrs_define
class SealedEntryView:
    """One entry of the transaction as sealed.

    Attributes:
        id (int):
        account (str):
        currency (str):
        amount (int): Minor units, signed: negative debits the account. What is hashed.
        amount_decimal (str): The amount in the currency's units, for reading (not hashed).
        ledger_time (datetime.datetime):
        digest (str): SHA-256 of the entry's text (docs/verification.md), lowercase hex.
        sequence (int | None | Unset): A wallet entry's place in its chain and the balance after it; `null` on a system
            account.
        balance_after (int | None | Unset):
        balance_after_decimal (None | str | Unset):
        effective_at (datetime.datetime | None | Unset): The backdated date, `null` when the entry is not backdated.
    """

    id: int
    account: str
    currency: str
    amount: int
    amount_decimal: str
    ledger_time: datetime.datetime
    digest: str
    sequence: int | None | Unset = UNSET
    balance_after: int | None | Unset = UNSET
    balance_after_decimal: None | str | Unset = UNSET
    effective_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        account = self.account

        currency = self.currency

        amount = self.amount

        amount_decimal = self.amount_decimal

        ledger_time = self.ledger_time.isoformat()

        digest = self.digest

        sequence: int | None | Unset
        if isinstance(self.sequence, Unset):
            sequence = UNSET
        else:
            sequence = self.sequence

        balance_after: int | None | Unset
        if isinstance(self.balance_after, Unset):
            balance_after = UNSET
        else:
            balance_after = self.balance_after

        balance_after_decimal: None | str | Unset
        if isinstance(self.balance_after_decimal, Unset):
            balance_after_decimal = UNSET
        else:
            balance_after_decimal = self.balance_after_decimal

        effective_at: None | str | Unset
        if isinstance(self.effective_at, Unset):
            effective_at = UNSET
        elif isinstance(self.effective_at, datetime.datetime):
            effective_at = self.effective_at.isoformat()
        else:
            effective_at = self.effective_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "account": account,
                "currency": currency,
                "amount": amount,
                "amount_decimal": amount_decimal,
                "ledger_time": ledger_time,
                "digest": digest,
            }
        )
        if sequence is not UNSET:
            field_dict["sequence"] = sequence
        if balance_after is not UNSET:
            field_dict["balance_after"] = balance_after
        if balance_after_decimal is not UNSET:
            field_dict["balance_after_decimal"] = balance_after_decimal
        if effective_at is not UNSET:
            field_dict["effective_at"] = effective_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = d.pop("id")

        account = d.pop("account")

        currency = d.pop("currency")

        amount = d.pop("amount")

        amount_decimal = d.pop("amount_decimal")

        ledger_time = datetime.datetime.fromisoformat(d.pop("ledger_time"))

        digest = d.pop("digest")

        def _parse_sequence(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        sequence = _parse_sequence(d.pop("sequence", UNSET))

        def _parse_balance_after(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        balance_after = _parse_balance_after(d.pop("balance_after", UNSET))

        def _parse_balance_after_decimal(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        balance_after_decimal = _parse_balance_after_decimal(d.pop("balance_after_decimal", UNSET))

        def _parse_effective_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                effective_at_type_0 = datetime.datetime.fromisoformat(data)

                return effective_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        effective_at = _parse_effective_at(d.pop("effective_at", UNSET))

        sealed_entry_view = cls(
            id=id,
            account=account,
            currency=currency,
            amount=amount,
            amount_decimal=amount_decimal,
            ledger_time=ledger_time,
            digest=digest,
            sequence=sequence,
            balance_after=balance_after,
            balance_after_decimal=balance_after_decimal,
            effective_at=effective_at,
        )

        sealed_entry_view.additional_properties = d
        return sealed_entry_view

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
