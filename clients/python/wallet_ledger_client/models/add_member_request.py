from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

from ..models.member_kind import MemberKind

T = TypeVar("T", bound="AddMemberRequest")


@_attrs_define
class AddMemberRequest:
    """
    Attributes:
        type_ (MemberKind): What a member is: a wallet or a nested set.
        id (str):
    """

    type_: MemberKind
    id: str

    def to_dict(self) -> dict[str, Any]:
        type_ = self.type_.value

        id = self.id

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "type": type_,
                "id": id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        type_ = MemberKind(d.pop("type"))

        id = d.pop("id")

        add_member_request = cls(
            type_=type_,
            id=id,
        )

        return add_member_request
