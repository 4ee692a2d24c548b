from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.finding_check import FindingCheck
from ..types import UNSET, Unset

T = TypeVar("T", bound="Finding")


@_attrs_define
class Finding:
    """One broken invariant, with the rows that show it.

    Attributes:
        check (FindingCheck): Which invariant a finding breaks, by its stable name: `unbalanced_transaction`,
            `trial_balance`, `wallet_chain`, `chain_link`, `checkpoint_seal`, `sealed_head`,
            `sealed_transaction`, `checkpoint_mismatch`, `balance_range`, `posting_mismatch`, `overdue_hold`,
            `stale_open_hold`, `over_reversed`, `entry_mismatch`, `set_totals`.
        detail (str):
        account (None | str | Unset):
        entry (int | None | Unset):
        transaction (None | Unset | UUID):
    """

    check: FindingCheck
    detail: str
    account: None | str | Unset = UNSET
    entry: int | None | Unset = UNSET
    transaction: None | Unset | UUID = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        check = self.check.value

        detail = self.detail

        account: None | str | Unset
        if isinstance(self.account, Unset):
            account = UNSET
        else:
            account = self.account

        entry: int | None | Unset
        if isinstance(self.entry, Unset):
            entry = UNSET
        else:
            entry = self.entry

        transaction: None | str | Unset
        if isinstance(self.transaction, Unset):
            transaction = UNSET
        elif isinstance(self.transaction, UUID):
            transaction = str(self.transaction)
        else:
            transaction = self.transaction

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "check": check,
                "detail": detail,
            }
        )
        if account is not UNSET:
            field_dict["account"] = account
        if entry is not UNSET:
            field_dict["entry"] = entry
        if transaction is not UNSET:
            field_dict["transaction"] = transaction

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        check = FindingCheck(d.pop("check"))

        detail = d.pop("detail")

        def _parse_account(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        account = _parse_account(d.pop("account", UNSET))

        def _parse_entry(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        entry = _parse_entry(d.pop("entry", UNSET))

        def _parse_transaction(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                transaction_type_0 = UUID(data)

                return transaction_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        transaction = _parse_transaction(d.pop("transaction", UNSET))

        finding = cls(
            check=check,
            detail=detail,
            account=account,
            entry=entry,
            transaction=transaction,
        )

        finding.additional_properties = d
        return finding

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
