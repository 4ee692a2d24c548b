from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.field_error import FieldError


T = TypeVar("T", bound="Problem")


@_attrs_define
class Problem:
    """`application/problem+json` body.

    Attributes:
        type_ (str): A URI naming the kind of problem: `/problems/{code}`, documented in `docs/api.md`.
        title (str):
        status (int):
        detail (str):
        code (str): Stable machine-readable code (`insufficient_funds`, `validation_failed`, ...).
        instance (None | str | Unset):
        errors (list[FieldError] | Unset):
        differing_fields (list[str] | Unset): For `idempotency_mismatch`: JSON pointers of the fields that differ from
            the stored request.
        current_status (None | str | Unset): For `invalid_transition`: the status the resource is in.
        index (int | None | Unset): For `batch_failed`: the index of the first item that could not be created...
        problem (Problem | Unset): `application/problem+json` body.
    """

    type_: str
    title: str
    status: int
    detail: str
    code: str
    instance: None | str | Unset = UNSET
    errors: list[FieldError] | Unset = UNSET
    differing_fields: list[str] | Unset = UNSET
    current_status: None | str | Unset = UNSET
    index: int | None | Unset = UNSET
    problem: Problem | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        type_ = self.type_

        title = self.title

        status = self.status

        detail = self.detail

        code = self.code

        instance: None | str | Unset
        if isinstance(self.instance, Unset):
            instance = UNSET
        else:
            instance = self.instance

        errors: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.errors, Unset):
            errors = []
            for errors_item_data in self.errors:
                errors_item = errors_item_data.to_dict()
                errors.append(errors_item)

        differing_fields: list[str] | Unset = UNSET
        if not isinstance(self.differing_fields, Unset):
            differing_fields = self.differing_fields

        current_status: None | str | Unset
        if isinstance(self.current_status, Unset):
            current_status = UNSET
        else:
            current_status = self.current_status

        index: int | None | Unset
        if isinstance(self.index, Unset):
            index = UNSET
        else:
            index = self.index

        problem: dict[str, Any] | Unset = UNSET
        if not isinstance(self.problem, Unset):
            problem = self.problem.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "type": type_,
                "title": title,
                "status": status,
                "detail": detail,
                "code": code,
            }
        )
        if instance is not UNSET:
            field_dict["instance"] = instance
        if errors is not UNSET:
            field_dict["errors"] = errors
        if differing_fields is not UNSET:
            field_dict["differing_fields"] = differing_fields
        if current_status is not UNSET:
            field_dict["current_status"] = current_status
        if index is not UNSET:
            field_dict["index"] = index
        if problem is not UNSET:
            field_dict["problem"] = problem

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.field_error import FieldError  # noqa: PLC0415

        d = dict(src_dict)
        type_ = d.pop("type")

        title = d.pop("title")

        status = d.pop("status")

        detail = d.pop("detail")

        code = d.pop("code")

        def _parse_instance(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        instance = _parse_instance(d.pop("instance", UNSET))

        _errors = d.pop("errors", UNSET)
        errors: list[FieldError] | Unset = UNSET
        if _errors is not UNSET:
            errors = []
            for errors_item_data in _errors:
                errors_item = FieldError.from_dict(errors_item_data)

                errors.append(errors_item)

        differing_fields = cast(list[str], d.pop("differing_fields", UNSET))

        def _parse_current_status(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        current_status = _parse_current_status(d.pop("current_status", UNSET))

        def _parse_index(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        index = _parse_index(d.pop("index", UNSET))

        _problem = d.pop("problem", UNSET)
        problem: Problem | Unset
        if isinstance(_problem, Unset):
            problem = UNSET
        else:
            problem = Problem.from_dict(_problem)

        problem = cls(
            type_=type_,
            title=title,
            status=status,
            detail=detail,
            code=code,
            instance=instance,
            errors=errors,
            differing_fields=differing_fields,
            current_status=current_status,
            index=index,
            problem=problem,
        )

        problem.additional_properties = d
        return problem

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
