from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="MetadataErasureRequest")


@_attrs_define
class MetadataErasureRequest:
    """
    Attributes:
        reason (str): Why the metadata is erased, kept in the audit log with who erased it: 1-500 characters,
            not all blank, no control characters. It is not sent in the event.
    """

    reason: str

    def to_dict(self) -> dict[str, Any]:
        reason = self.reason

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "reason": reason,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        reason = d.pop("reason")

        metadata_erasure_request = cls(
            reason=reason,
        )

        return metadata_erasure_request
