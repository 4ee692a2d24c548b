from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="FieldError")


@_attrs_define
class FieldError:
    """One invalid field of a request: `field` is a JSON pointer into the request body
    (`/entries/1/amount`) or into its query parameters (`/limit`), or the name of a header
    (`Idempotency-Key`).

        Attributes:
            field (str):
            code (str): Stable, documented in docs/api.md: `required`, `unknown_field`, `duplicate_field`,
                `invalid_type`, `range`, `invalid_character` (U+0000 in metadata or a query parameter),
                `number_range` (a metadata integer beyond 64 bits), `cursor` (not a cursor of this
                list), `balance_overflow`, and the other field rules.
            message (str):
    """

    field: str
    code: str
    message: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        field = self.field

        code = self.code

        message = self.message

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "field": field,
                "code": code,
                "message": message,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        field = d.pop("field")

        code = d.pop("code")

        message = d.pop("message")

        field_error = cls(
            field=field,
            code=code,
            message=message,
        )

        field_error.additional_properties = d
        return field_error

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
