from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.refusal_view_code import RefusalViewCode

T = TypeVar("T", bound="RefusalView")


@_attrs_define
class RefusalView:
    """
    Attributes:
        code (RefusalViewCode): Why a create was refused for a business reason: stored under its id, and every retry
            gets
            the same refusal.
        detail (str):
    """

    code: RefusalViewCode
    detail: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        code = self.code.value

        detail = self.detail

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "code": code,
                "detail": detail,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        code = RefusalViewCode(d.pop("code"))

        detail = d.pop("detail")

        refusal_view = cls(
            code=code,
            detail=detail,
        )

        refusal_view.additional_properties = d
        return refusal_view

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
