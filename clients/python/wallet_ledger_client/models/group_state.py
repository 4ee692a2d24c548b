from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.consumer_pending import ConsumerPending


T = TypeVar("T", bound="GroupState")


@_attrs_define
class GroupState:
    """One consumer group's backlog (shown as is by `GET /v1/consumer`).

    Attributes:
        name (str):
        consumers (int): Consumers the group knows (those that stopped too, until removed).
        pending (int): Delivered to a consumer and not acknowledged yet.
        last_delivered_id (str):
        pending_by_consumer (list[ConsumerPending]): Pending messages of each consumer that holds any, by name.
        lag (int | None | Unset): Not delivered to the group yet; `null` when Redis cannot tell (after a trim or a
            deletion past the group's position).
        oldest_pending_id (None | str | Unset): The oldest pending entry's id (`null` with nothing pending): how far
            behind the
            slowest message is.
    """

    name: str
    consumers: int
    pending: int
    last_delivered_id: str
    pending_by_consumer: list[ConsumerPending]
    lag: int | None | Unset = UNSET
    oldest_pending_id: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        consumers = self.consumers

        pending = self.pending

        last_delivered_id = self.last_delivered_id

        pending_by_consumer = []
        for pending_by_consumer_item_data in self.pending_by_consumer:
            pending_by_consumer_item = pending_by_consumer_item_data.to_dict()
            pending_by_consumer.append(pending_by_consumer_item)

        lag: int | None | Unset
        if isinstance(self.lag, Unset):
            lag = UNSET
        else:
            lag = self.lag

        oldest_pending_id: None | str | Unset
        if isinstance(self.oldest_pending_id, Unset):
            oldest_pending_id = UNSET
        else:
            oldest_pending_id = self.oldest_pending_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "name": name,
                "consumers": consumers,
                "pending": pending,
                "last_delivered_id": last_delivered_id,
                "pending_by_consumer": pending_by_consumer,
            }
        )
        if lag is not UNSET:
            field_dict["lag"] = lag
        if oldest_pending_id is not UNSET:
            field_dict["oldest_pending_id"] = oldest_pending_id

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.consumer_pending import ConsumerPending  # noqa: PLC0415

        d = dict(src_dict)
        name = d.pop("name")

        consumers = d.pop("consumers")

        pending = d.pop("pending")

        last_delivered_id = d.pop("last_delivered_id")

        pending_by_consumer = []
        _pending_by_consumer = d.pop("pending_by_consumer")
        for pending_by_consumer_item_data in _pending_by_consumer:
            pending_by_consumer_item = ConsumerPending.from_dict(pending_by_consumer_item_data)

            pending_by_consumer.append(pending_by_consumer_item)

        def _parse_lag(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        lag = _parse_lag(d.pop("lag", UNSET))

        def _parse_oldest_pending_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        oldest_pending_id = _parse_oldest_pending_id(d.pop("oldest_pending_id", UNSET))

        group_state = cls(
            name=name,
            consumers=consumers,
            pending=pending,
            last_delivered_id=last_delivered_id,
            pending_by_consumer=pending_by_consumer,
            lag=lag,
            oldest_pending_id=oldest_pending_id,
        )

        group_state.additional_properties = d
        return group_state

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
