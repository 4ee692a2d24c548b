from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.monitor_balances import MonitorBalances


T = TypeVar("T", bound="LastFiring")


@_attrs_define
class LastFiring:
    """A monitor's last firing.

    Attributes:
        triggered_at (datetime.datetime):
        transaction_id (UUID): The transaction whose posting, hold, capture or void crossed the condition.
        balances_before (MonitorBalances): Balances as monitors and their events show them: `available` spelled out,
            each amount with
            its `_decimal` form, like every amount.
        balances_after (MonitorBalances): Balances as monitors and their events show them: `available` spelled out, each
            amount with
            its `_decimal` form, like every amount.
    """

    triggered_at: datetime.datetime
    transaction_id: UUID
    balances_before: MonitorBalances
    balances_after: MonitorBalances
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        triggered_at = self.triggered_at.isoformat()

        transaction_id = str(self.transaction_id)

        balances_before = self.balances_before.to_dict()

        balances_after = self.balances_after.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "triggered_at": triggered_at,
                "transaction_id": transaction_id,
                "balances_before": balances_before,
                "balances_after": balances_after,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.monitor_balances import MonitorBalances  # noqa: PLC0415

        d = dict(src_dict)
        triggered_at = datetime.datetime.fromisoformat(d.pop("triggered_at"))

        transaction_id = UUID(d.pop("transaction_id"))

        balances_before = MonitorBalances.from_dict(d.pop("balances_before"))

        balances_after = MonitorBalances.from_dict(d.pop("balances_after"))

        last_firing = cls(
            triggered_at=triggered_at,
            transaction_id=transaction_id,
            balances_before=balances_before,
            balances_after=balances_after,
        )

        last_firing.additional_properties = d
        return last_firing

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
