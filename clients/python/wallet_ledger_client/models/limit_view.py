from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.direction import Direction
from ..types import UNSET, Unset

T = TypeVar("T", bound="LimitView")


@_attrs_define
class LimitView:
    """A limit as the API shows it.

    Attributes:
        id (UUID):
        direction (Direction): Which movements a limit counts.
        window_seconds (int): The rolling window, 60 to 2,678,400 seconds (1 minute to 31 days).
        created_at (datetime.datetime):
        account_id (None | str | Unset): The wallet it holds; `null` for a set's limit.
        set_id (None | str | Unset): The account set it holds; `null` for a wallet's limit.
        amount (int | None | Unset): The most the window lets through, in minor units of the account's currency (an
            amount
            limit), else `null`.
        amount_decimal (None | str | Unset): `amount` in major units (`"5000.00"`), else `null`.
        count (int | None | Unset): The most movements the window lets through (a count limit), else `null`.
        deleted_at (datetime.datetime | None | Unset): When it was deleted (it no longer counts), else `null`.
    """

    id: UUID
    direction: Direction
    window_seconds: int
    created_at: datetime.datetime
    account_id: None | str | Unset = UNSET
    set_id: None | str | Unset = UNSET
    amount: int | None | Unset = UNSET
    amount_decimal: None | str | Unset = UNSET
    count: int | None | Unset = UNSET
    deleted_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        direction = self.direction.value

        window_seconds = self.window_seconds

        created_at = self.created_at.isoformat()

        account_id: None | str | Unset
        if isinstance(self.account_id, Unset):
            account_id = UNSET
        else:
            account_id = self.account_id

        set_id: None | str | Unset
        if isinstance(self.set_id, Unset):
            set_id = UNSET
        else:
            set_id = self.set_id

        amount: int | None | Unset
        if isinstance(self.amount, Unset):
            amount = UNSET
        else:
            amount = self.amount

        amount_decimal: None | str | Unset
        if isinstance(self.amount_decimal, Unset):
            amount_decimal = UNSET
        else:
            amount_decimal = self.amount_decimal

        count: int | None | Unset
        if isinstance(self.count, Unset):
            count = UNSET
        else:
            count = self.count

        deleted_at: None | str | Unset
        if isinstance(self.deleted_at, Unset):
            deleted_at = UNSET
        elif isinstance(self.deleted_at, datetime.datetime):
            deleted_at = self.deleted_at.isoformat()
        else:
            deleted_at = self.deleted_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "direction": direction,
                "window_seconds": window_seconds,
                "created_at": created_at,
            }
        )
        if account_id is not UNSET:
            field_dict["account_id"] = account_id
        if set_id is not UNSET:
            field_dict["set_id"] = set_id
        if amount is not UNSET:
            field_dict["amount"] = amount
        if amount_decimal is not UNSET:
            field_dict["amount_decimal"] = amount_decimal
        if count is not UNSET:
            field_dict["count"] = count
        if deleted_at is not UNSET:
            field_dict["deleted_at"] = deleted_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = UUID(d.pop("id"))

        direction = Direction(d.pop("direction"))

        window_seconds = d.pop("window_seconds")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        def _parse_account_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        account_id = _parse_account_id(d.pop("account_id", UNSET))

        def _parse_set_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        set_id = _parse_set_id(d.pop("set_id", UNSET))

        def _parse_amount(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        amount = _parse_amount(d.pop("amount", UNSET))

        def _parse_amount_decimal(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        amount_decimal = _parse_amount_decimal(d.pop("amount_decimal", UNSET))

        def _parse_count(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        count = _parse_count(d.pop("count", UNSET))

        def _parse_deleted_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                deleted_at_type_0 = datetime.datetime.fromisoformat(data)

                return deleted_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        deleted_at = _parse_deleted_at(d.pop("deleted_at", UNSET))

        limit_view = cls(
            id=id,
            direction=direction,
            window_seconds=window_seconds,
            created_at=created_at,
            account_id=account_id,
            set_id=set_id,
            amount=amount,
            amount_decimal=amount_decimal,
            count=count,
            deleted_at=deleted_at,
        )

        limit_view.additional_properties = d
        return limit_view

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
