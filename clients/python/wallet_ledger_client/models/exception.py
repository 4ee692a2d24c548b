from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.exception_code import ExceptionCode
from ..types import UNSET, Unset

T = TypeVar("T", bound="Exception_")


@_attrs_define
class Exception_:
    """One exception: one payment (or file line) and one category, with a reason per field,
    e.g. `"amount: ledger 50.00, provider 45.00"`.

        Attributes:
            code (ExceptionCode): What an exception says is wrong: one of the contract's seven codes.
            reasons (list[str]):
            payment_id (None | Unset | UUID):
            external_ref (None | str | Unset):
            line (int | None | Unset): The settlement file's line (1 is the header), when the exception comes from the file.
    """

    code: ExceptionCode
    reasons: list[str]
    payment_id: None | Unset | UUID = UNSET
    external_ref: None | str | Unset = UNSET
    line: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        code = self.code.value

        reasons = self.reasons

        payment_id: None | str | Unset
        if isinstance(self.payment_id, Unset):
            payment_id = UNSET
        elif isinstance(self.payment_id, UUID):
            payment_id = str(self.payment_id)
        else:
            payment_id = self.payment_id

        external_ref: None | str | Unset
        if isinstance(self.external_ref, Unset):
            external_ref = UNSET
        else:
            external_ref = self.external_ref

        line: int | None | Unset
        if isinstance(self.line, Unset):
            line = UNSET
        else:
            line = self.line

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "code": code,
                "reasons": reasons,
            }
        )
        if payment_id is not UNSET:
            field_dict["payment_id"] = payment_id
        if external_ref is not UNSET:
            field_dict["external_ref"] = external_ref
        if line is not UNSET:
            field_dict["line"] = line

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        code = ExceptionCode(d.pop("code"))

        reasons = cast(list[str], d.pop("reasons"))

        def _parse_payment_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                payment_id_type_0 = UUID(data)

                return payment_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        payment_id = _parse_payment_id(d.pop("payment_id", UNSET))

        def _parse_external_ref(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        external_ref = _parse_external_ref(d.pop("external_ref", UNSET))

        def _parse_line(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        line = _parse_line(d.pop("line", UNSET))

        exception = cls(
            code=code,
            reasons=reasons,
            payment_id=payment_id,
            external_ref=external_ref,
            line=line,
        )

        exception.additional_properties = d
        return exception

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
