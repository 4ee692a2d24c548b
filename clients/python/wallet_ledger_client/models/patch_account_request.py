from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.metadata import Metadata


T = TypeVar("T", bound="PatchAccountRequest")


@_attrs_define
class PatchAccountRequest:
    """
    Attributes:
        version (int): Applied only when newer than the stored version.
        metadata (Metadata): Any JSON object, stored and returned as sent.
    """

    version: int
    metadata: Metadata

    def to_dict(self) -> dict[str, Any]:
        version = self.version

        metadata = self.metadata.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "version": version,
                "metadata": metadata,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.metadata import Metadata  # noqa: PLC0415

        d = dict(src_dict)
        version = d.pop("version")

        metadata = Metadata.from_dict(d.pop("metadata"))

        patch_account_request = cls(
            version=version,
            metadata=metadata,
        )

        return patch_account_request
