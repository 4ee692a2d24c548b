from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.member_kind import MemberKind

T = TypeVar("T", bound="MemberView")


@_attrs_define
class MemberView:
    """A direct member as the API shows it.

    Attributes:
        type_ (MemberKind): What a member is: a wallet or a nested set.
        id (str):
        reference (str): `account:<id>` or `set:<id>`: how a path names it (`DELETE .../members/{member}`).
        added_at (datetime.datetime):
    """

    type_: MemberKind
    id: str
    reference: str
    added_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        type_ = self.type_.value

        id = self.id

        reference = self.reference

        added_at = self.added_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "type": type_,
                "id": id,
                "reference": reference,
                "added_at": added_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        type_ = MemberKind(d.pop("type"))

        id = d.pop("id")

        reference = d.pop("reference")

        added_at = datetime.datetime.fromisoformat(d.pop("added_at"))

        member_view = cls(
            type_=type_,
            id=id,
            reference=reference,
            added_at=added_at,
        )

        member_view.additional_properties = d
        return member_view

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
