from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="EntryView")


@_attrs_define
class EntryView:
    """
    Attributes:
        id (int):
        transaction_id (UUID):
        account (str):
        currency (str):
        amount (int):
        amount_decimal (str):
        ledger_time (datetime.datetime): When the entry was written: its chain's order (`balance_after` is by ledger
            time).
        effective_at (datetime.datetime): When it counts in balances by effective time: its transaction's
            `effective_at`.
        sequence (int | None | Unset): Wallets only: the entry's place in the account's gap-free chain.
        balance_after (int | None | Unset): Wallets only: the posted balance right after this entry.
        balance_after_decimal (None | str | Unset):
        link (None | str | Unset): Wallets only: the entry's link in its hash chain (`chain_hash`, lowercase hex),
            SHA-256
            over the previous entry's link and this entry (docs/verification.md); `null` on a system
            account and on entries written before links existed.
    """

    id: int
    transaction_id: UUID
    account: str
    currency: str
    amount: int
    amount_decimal: str
    ledger_time: datetime.datetime
    effective_at: datetime.datetime
    sequence: int | None | Unset = UNSET
    balance_after: int | None | Unset = UNSET
    balance_after_decimal: None | str | Unset = UNSET
    link: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        transaction_id = str(self.transaction_id)

        account = self.account

        currency = self.currency

        amount = self.amount

        amount_decimal = self.amount_decimal

        ledger_time = self.ledger_time.isoformat()

        effective_at = self.effective_at.isoformat()

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

        link: None | str | Unset
        if isinstance(self.link, Unset):
            link = UNSET
        else:
            link = self.link

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "transaction_id": transaction_id,
                "account": account,
                "currency": currency,
                "amount": amount,
                "amount_decimal": amount_decimal,
                "ledger_time": ledger_time,
                "effective_at": effective_at,
            }
        )
        if sequence is not UNSET:
            field_dict["sequence"] = sequence
        if balance_after is not UNSET:
            field_dict["balance_after"] = balance_after
        if balance_after_decimal is not UNSET:
            field_dict["balance_after_decimal"] = balance_after_decimal
        if link is not UNSET:
            field_dict["link"] = link

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = d.pop("id")

        transaction_id = UUID(d.pop("transaction_id"))

        account = d.pop("account")

        currency = d.pop("currency")

        amount = d.pop("amount")

        amount_decimal = d.pop("amount_decimal")

        ledger_time = datetime.datetime.fromisoformat(d.pop("ledger_time"))

        effective_at = datetime.datetime.fromisoformat(d.pop("effective_at"))

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

        def _parse_link(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        link = _parse_link(d.pop("link", UNSET))

        entry_view = cls(
            id=id,
            transaction_id=transaction_id,
            account=account,
            currency=currency,
            amount=amount,
            amount_decimal=amount_decimal,
            ledger_time=ledger_time,
            effective_at=effective_at,
            sequence=sequence,
            balance_after=balance_after,
            balance_after_decimal=balance_after_decimal,
            link=link,
        )

        entry_view.additional_properties = d
        return entry_view

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
