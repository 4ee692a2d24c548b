from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.sealed_entry_view import SealedEntryView
    from ..models.sealed_metadata_view import SealedMetadataView


T = TypeVar("T", bound="SealedTransactionView")


@_attrs_define
class SealedTransactionView:
    """
    Attributes:
        id (UUID):
        metadata (SealedMetadataView): The transaction's metadata as sealed: its digest, and what it was taken from
            while the
            metadata is not erased.
        entries (list[SealedEntryView]): Its entries, by id.
    """

    id: UUID
    metadata: SealedMetadataView
    entries: list[SealedEntryView]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        metadata = self.metadata.to_dict()

        entries = []
        for entries_item_data in self.entries:
            entries_item = entries_item_data.to_dict()
            entries.append(entries_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "metadata": metadata,
                "entries": entries,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.sealed_entry_view import SealedEntryView  # noqa: PLC0415
        from ..models.sealed_metadata_view import SealedMetadataView  # noqa: PLC0415

        d = dict(src_dict)
        id = UUID(d.pop("id"))

        metadata = SealedMetadataView.from_dict(d.pop("metadata"))

        entries = []
        _entries = d.pop("entries")
        for entries_item_data in _entries:
            entries_item = SealedEntryView.from_dict(entries_item_data)

            entries.append(entries_item)

        sealed_transaction_view = cls(
            id=id,
            metadata=metadata,
            entries=entries,
        )

        sealed_transaction_view.additional_properties = d
        return sealed_transaction_view

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
