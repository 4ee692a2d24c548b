from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..models.direction import Direction
from ..types import UNSET, Unset

T = TypeVar("T", bound="CreateLimitRequest")


@_attrs_define
class CreateLimitRequest:
    """
    Attributes:
        direction (Direction): Which movements a limit counts.
        window_seconds (int): The rolling window in seconds: 60 (a minute) to 2,678,400 (31 days).
        id (None | Unset | UUID): The caller's id; without it an `Idempotency-Key` header derives one.
        amount (int | None | Unset): At most this much moved per window, in minor units of the account's currency.
            Exactly
            one of `amount` and `count`.
        count (int | None | Unset): At most this many movements per window. Exactly one of `amount` and `count`.
    """

    direction: Direction
    window_seconds: int
    id: None | Unset | UUID = UNSET
    amount: int | None | Unset = UNSET
    count: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        direction = self.direction.value

        window_seconds = self.window_seconds

        id: None | str | Unset
        if isinstance(self.id, Unset):
            id = UNSET
        elif isinstance(self.id, UUID):
            id = str(self.id)
        else:
            id = self.id

        amount: int | None | Unset
        if isinstance(self.amount, Unset):
            amount = UNSET
        else:
            amount = self.amount

        count: int | None | Unset
        if isinstance(self.count, Unset):
            count = UNSET
        else:
            count = self.count

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "direction": direction,
                "window_seconds": window_seconds,
            }
        )
        if id is not UNSET:
            field_dict["id"] = id
        if amount is not UNSET:
            field_dict["amount"] = amount
        if count is not UNSET:
            field_dict["count"] = count

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        direction = Direction(d.pop("direction"))

        window_seconds = d.pop("window_seconds")

        def _parse_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                id_type_0 = UUID(data)

                return id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        id = _parse_id(d.pop("id", UNSET))

        def _parse_amount(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        amount = _parse_amount(d.pop("amount", UNSET))

        def _parse_count(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        count = _parse_count(d.pop("count", UNSET))

        create_limit_request = cls(
            direction=direction,
            window_seconds=window_seconds,
            id=id,
            amount=amount,
            count=count,
        )

        return create_limit_request
