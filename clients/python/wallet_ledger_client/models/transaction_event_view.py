from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.event_type_name import EventTypeName
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.delivery_view import DeliveryView


T = TypeVar("T", bound="TransactionEventView")


@_attrs_define
class TransactionEventView:
    """One outbox event of a transaction, with its deliveries.

    Attributes:
        id (UUID):
        type_ (EventTypeName): An outbox event's type (docs/outbox.md).
        created_at (datetime.datetime):
        deliveries_total (int): How many deliveries the event has; `deliveries` lists the first 20 of them.
        deliveries (list[DeliveryView]): Oldest first.
        account_id (None | str | Unset): The wallet an `account.negative_balance` or `balance.monitor_triggered` event
            is about;
            null for the others, and for a monitor of an account set (its event's data names the set).
        fanned_out_at (datetime.datetime | None | Unset): When the dispatcher turned the event into its deliveries; null
            until then.
        streamed_at (datetime.datetime | None | Unset): When the event went onto the outbound stream; null until then,
            and always without one.
    """

    id: UUID
    type_: EventTypeName
    created_at: datetime.datetime
    deliveries_total: int
    deliveries: list[DeliveryView]
    account_id: None | str | Unset = UNSET
    fanned_out_at: datetime.datetime | None | Unset = UNSET
    streamed_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        type_ = self.type_.value

        created_at = self.created_at.isoformat()

        deliveries_total = self.deliveries_total

        deliveries = []
        for deliveries_item_data in self.deliveries:
            deliveries_item = deliveries_item_data.to_dict()
            deliveries.append(deliveries_item)

        account_id: None | str | Unset
        if isinstance(self.account_id, Unset):
            account_id = UNSET
        else:
            account_id = self.account_id

        fanned_out_at: None | str | Unset
        if isinstance(self.fanned_out_at, Unset):
            fanned_out_at = UNSET
        elif isinstance(self.fanned_out_at, datetime.datetime):
            fanned_out_at = self.fanned_out_at.isoformat()
        else:
            fanned_out_at = self.fanned_out_at

        streamed_at: None | str | Unset
        if isinstance(self.streamed_at, Unset):
            streamed_at = UNSET
        elif isinstance(self.streamed_at, datetime.datetime):
            streamed_at = self.streamed_at.isoformat()
        else:
            streamed_at = self.streamed_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "type": type_,
                "created_at": created_at,
                "deliveries_total": deliveries_total,
                "deliveries": deliveries,
            }
        )
        if account_id is not UNSET:
            field_dict["account_id"] = account_id
        if fanned_out_at is not UNSET:
            field_dict["fanned_out_at"] = fanned_out_at
        if streamed_at is not UNSET:
            field_dict["streamed_at"] = streamed_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.delivery_view import DeliveryView  # noqa: PLC0415

        d = dict(src_dict)
        id = UUID(d.pop("id"))

        type_ = EventTypeName(d.pop("type"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        deliveries_total = d.pop("deliveries_total")

        deliveries = []
        _deliveries = d.pop("deliveries")
        for deliveries_item_data in _deliveries:
            deliveries_item = DeliveryView.from_dict(deliveries_item_data)

            deliveries.append(deliveries_item)

        def _parse_account_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        account_id = _parse_account_id(d.pop("account_id", UNSET))

        def _parse_fanned_out_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                fanned_out_at_type_0 = datetime.datetime.fromisoformat(data)

                return fanned_out_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        fanned_out_at = _parse_fanned_out_at(d.pop("fanned_out_at", UNSET))

        def _parse_streamed_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                streamed_at_type_0 = datetime.datetime.fromisoformat(data)

                return streamed_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        streamed_at = _parse_streamed_at(d.pop("streamed_at", UNSET))

        transaction_event_view = cls(
            id=id,
            type_=type_,
            created_at=created_at,
            deliveries_total=deliveries_total,
            deliveries=deliveries,
            account_id=account_id,
            fanned_out_at=fanned_out_at,
            streamed_at=streamed_at,
        )

        transaction_event_view.additional_properties = d
        return transaction_event_view

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
