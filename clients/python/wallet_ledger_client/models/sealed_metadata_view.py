from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="SealedMetadataView")


@_attrs_define
class SealedMetadataView:
    """The transaction's metadata as sealed: its digest, and what it was taken from while the
    metadata is not erased.

        Attributes:
            digest (str): SHA-256(salt ‖ text), lowercase hex: what the leaf holds.
            erased (bool): The metadata was erased: the digest is the one kept from before.
            text (None | str | Unset): The metadata exactly as hashed (PostgreSQL's rendering of the JSON); `null` once
                erased.
            salt (None | str | Unset): Its 16 random bytes in hex; `null` once erased, or for a transaction written before
                salts existed.
    """

    digest: str
    erased: bool
    text: None | str | Unset = UNSET
    salt: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        digest = self.digest

        erased = self.erased

        text: None | str | Unset
        if isinstance(self.text, Unset):
            text = UNSET
        else:
            text = self.text

        salt: None | str | Unset
        if isinstance(self.salt, Unset):
            salt = UNSET
        else:
            salt = self.salt

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "digest": digest,
                "erased": erased,
            }
        )
        if text is not UNSET:
            field_dict["text"] = text
        if salt is not UNSET:
            field_dict["salt"] = salt

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        digest = d.pop("digest")

        erased = d.pop("erased")

        def _parse_text(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        text = _parse_text(d.pop("text", UNSET))

        def _parse_salt(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        salt = _parse_salt(d.pop("salt", UNSET))

        sealed_metadata_view = cls(
            digest=digest,
            erased=erased,
            text=text,
            salt=salt,
        )

        sealed_metadata_view.additional_properties = d
        return sealed_metadata_view

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
