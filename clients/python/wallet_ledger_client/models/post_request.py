from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="PostRequest")


@_attrs_define
class PostRequest:
    """
    Attributes:
        amount (int | None | Unset): Two-leg holds: capture this much (at most what is held); the rest is released.
            Without it the whole hold is captured.
    """

    amount: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        amount: int | None | Unset
        if isinstance(self.amount, Unset):
            amount = UNSET
        else:
            amount = self.amount

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if amount is not UNSET:
            field_dict["amount"] = amount

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_amount(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        amount = _parse_amount(d.pop("amount", UNSET))

        post_request = cls(
            amount=amount,
        )

        return post_request
