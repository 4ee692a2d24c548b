from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="CheckpointView")


@_attrs_define
class CheckpointView:
    """A signed checkpoint: hashes in lowercase hex, the key and the signature in base64.

    Attributes:
        n (int):
        sealed_at (datetime.datetime): When it was sealed; its microseconds are part of what is hashed.
        head_count (int): How many accounts' heads its tree holds (wallets', and from version 2 system
            accounts').
        heads_root (str):
        root (str): SHA-256 of the checkpoint's text (docs/verification.md), which the signature covers.
        public_key (str): The Ed25519 key that signed it (base64).
        signature (str): Ed25519 over the root (base64).
        previous_root (None | str | Unset): The root of checkpoint n − 1; `null` for the first.
        transaction_count (int | None | Unset): How many transactions it seals; `null` in a version 1 checkpoint, which
            sealed none.
        transactions_root (None | str | Unset): The Merkle root over them; `null` in a version 1 checkpoint.
    """

    n: int
    sealed_at: datetime.datetime
    head_count: int
    heads_root: str
    root: str
    public_key: str
    signature: str
    previous_root: None | str | Unset = UNSET
    transaction_count: int | None | Unset = UNSET
    transactions_root: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        n = self.n

        sealed_at = self.sealed_at.isoformat()

        head_count = self.head_count

        heads_root = self.heads_root

        root = self.root

        public_key = self.public_key

        signature = self.signature

        previous_root: None | str | Unset
        if isinstance(self.previous_root, Unset):
            previous_root = UNSET
        else:
            previous_root = self.previous_root

        transaction_count: int | None | Unset
        if isinstance(self.transaction_count, Unset):
            transaction_count = UNSET
        else:
            transaction_count = self.transaction_count

        transactions_root: None | str | Unset
        if isinstance(self.transactions_root, Unset):
            transactions_root = UNSET
        else:
            transactions_root = self.transactions_root

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "n": n,
                "sealed_at": sealed_at,
                "head_count": head_count,
                "heads_root": heads_root,
                "root": root,
                "public_key": public_key,
                "signature": signature,
            }
        )
        if previous_root is not UNSET:
            field_dict["previous_root"] = previous_root
        if transaction_count is not UNSET:
            field_dict["transaction_count"] = transaction_count
        if transactions_root is not UNSET:
            field_dict["transactions_root"] = transactions_root

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        n = d.pop("n")

        sealed_at = datetime.datetime.fromisoformat(d.pop("sealed_at"))

        head_count = d.pop("head_count")

        heads_root = d.pop("heads_root")

        root = d.pop("root")

        public_key = d.pop("public_key")

        signature = d.pop("signature")

        def _parse_previous_root(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        previous_root = _parse_previous_root(d.pop("previous_root", UNSET))

        def _parse_transaction_count(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        transaction_count = _parse_transaction_count(d.pop("transaction_count", UNSET))

        def _parse_transactions_root(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        transactions_root = _parse_transactions_root(d.pop("transactions_root", UNSET))

        checkpoint_view = cls(
            n=n,
            sealed_at=sealed_at,
            head_count=head_count,
            heads_root=heads_root,
            root=root,
            public_key=public_key,
            signature=signature,
            previous_root=previous_root,
            transaction_count=transaction_count,
            transactions_root=transactions_root,
        )

        checkpoint_view.additional_properties = d
        return checkpoint_view

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
