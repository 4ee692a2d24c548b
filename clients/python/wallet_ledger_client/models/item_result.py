from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.problem import Problem
    from ..models.transaction_view import TransactionView


T = TypeVar("T", bound="ItemResult")


@_attrs_define
class ItemResult:
    """What one item's single call would have answered.

    Attributes:
        status (int):
        replayed (bool): `true` when the answer is a stored one replayed (`Idempotent-Replayed` of a single call).
        body (Problem | TransactionView):
    """

    status: int
    replayed: bool
    body: Problem | TransactionView
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.transaction_view import TransactionView  # noqa: PLC0415

        status = self.status

        replayed = self.replayed

        body: dict[str, Any]
        if isinstance(self.body, TransactionView):
            body = self.body.to_dict()
        else:
            body = self.body.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "status": status,
                "replayed": replayed,
                "body": body,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.problem import Problem  # noqa: PLC0415
        from ..models.transaction_view import TransactionView  # noqa: PLC0415

        d = dict(src_dict)
        status = d.pop("status")

        replayed = d.pop("replayed")

        def _parse_body(data: object) -> Problem | TransactionView:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                body_type_0 = TransactionView.from_dict(data)

                return body_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            body_type_1 = Problem.from_dict(data)

            return body_type_1

        body = _parse_body(d.pop("body"))

        item_result = cls(
            status=status,
            replayed=replayed,
            body=body,
        )

        item_result.additional_properties = d
        return item_result

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
