from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.checkpoint_view import CheckpointView
    from ..models.sealed_transaction_view import SealedTransactionView


T = TypeVar("T", bound="TransactionProof")


@_attrs_define
class TransactionProof:
    """That `transaction` is leaf `leaf_index` of `checkpoint`'s transactions tree.

    Attributes:
        checkpoint (CheckpointView): A signed checkpoint: hashes in lowercase hex, the key and the signature in base64.
        transaction (SealedTransactionView):
        leaf_index (int): Its place among the checkpoint's transactions, ordered by id's bytes.
        path (list[str]): The RFC 6962 audit path from its leaf up to `transactions_root`, lowercase hex.
    """

    checkpoint: CheckpointView
    transaction: SealedTransactionView
    leaf_index: int
    path: list[str]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        checkpoint = self.checkpoint.to_dict()

        transaction = self.transaction.to_dict()

        leaf_index = self.leaf_index

        path = self.path

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "checkpoint": checkpoint,
                "transaction": transaction,
                "leaf_index": leaf_index,
                "path": path,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.checkpoint_view import CheckpointView  # noqa: PLC0415
        from ..models.sealed_transaction_view import SealedTransactionView  # noqa: PLC0415

        d = dict(src_dict)
        checkpoint = CheckpointView.from_dict(d.pop("checkpoint"))

        transaction = SealedTransactionView.from_dict(d.pop("transaction"))

        leaf_index = d.pop("leaf_index")

        path = cast(list[str], d.pop("path"))

        transaction_proof = cls(
            checkpoint=checkpoint,
            transaction=transaction,
            leaf_index=leaf_index,
            path=path,
        )

        transaction_proof.additional_properties = d
        return transaction_proof

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
