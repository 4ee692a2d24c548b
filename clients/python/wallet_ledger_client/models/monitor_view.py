from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.monitor_field import MonitorField
from ..models.monitor_operator import MonitorOperator
from ..models.monitor_state import MonitorState
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.last_firing import LastFiring


T = TypeVar("T", bound="MonitorView")


@_attrs_define
class MonitorView:
    """A monitor as the API shows it.

    Attributes:
        id (UUID):
        field (MonitorField): Which balance a monitor watches.
        operator (MonitorOperator): How the balance compares with the monitor's value.
        value (int): In minor units of the account's currency.
        value_decimal (str): `value` in major units (`"50.00"`).
        trigger_count (int): How many times it fired.
        created_at (datetime.datetime):
        account_id (None | str | Unset): The wallet it watches; `null` for a set's monitor.
        set_id (None | str | Unset): The account set it watches; `null` for a wallet's monitor.
        state (MonitorState | None | Unset):
        last_triggered (LastFiring | None | Unset):
        deleted_at (datetime.datetime | None | Unset): When it was deleted (it no longer fires), else `null`.
    """

    id: UUID
    field: MonitorField
    operator: MonitorOperator
    value: int
    value_decimal: str
    trigger_count: int
    created_at: datetime.datetime
    account_id: None | str | Unset = UNSET
    set_id: None | str | Unset = UNSET
    state: MonitorState | None | Unset = UNSET
    last_triggered: LastFiring | None | Unset = UNSET
    deleted_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.last_firing import LastFiring  # noqa: PLC0415

        id = str(self.id)

        field = self.field.value

        operator = self.operator.value

        value = self.value

        value_decimal = self.value_decimal

        trigger_count = self.trigger_count

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

        state: None | str | Unset
        if isinstance(self.state, Unset):
            state = UNSET
        elif isinstance(self.state, MonitorState):
            state = self.state.value
        else:
            state = self.state

        last_triggered: dict[str, Any] | None | Unset
        if isinstance(self.last_triggered, Unset):
            last_triggered = UNSET
        elif isinstance(self.last_triggered, LastFiring):
            last_triggered = self.last_triggered.to_dict()
        else:
            last_triggered = self.last_triggered

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
                "field": field,
                "operator": operator,
                "value": value,
                "value_decimal": value_decimal,
                "trigger_count": trigger_count,
                "created_at": created_at,
            }
        )
        if account_id is not UNSET:
            field_dict["account_id"] = account_id
        if set_id is not UNSET:
            field_dict["set_id"] = set_id
        if state is not UNSET:
            field_dict["state"] = state
        if last_triggered is not UNSET:
            field_dict["last_triggered"] = last_triggered
        if deleted_at is not UNSET:
            field_dict["deleted_at"] = deleted_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.last_firing import LastFiring  # noqa: PLC0415

        d = dict(src_dict)
        id = UUID(d.pop("id"))

        field = MonitorField(d.pop("field"))

        operator = MonitorOperator(d.pop("operator"))

        value = d.pop("value")

        value_decimal = d.pop("value_decimal")

        trigger_count = d.pop("trigger_count")

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

        def _parse_state(data: object) -> MonitorState | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                state_type_0 = MonitorState(data)

                return state_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(MonitorState | None | Unset, data)

        state = _parse_state(d.pop("state", UNSET))

        def _parse_last_triggered(data: object) -> LastFiring | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                last_triggered_type_0 = LastFiring.from_dict(data)

                return last_triggered_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(LastFiring | None | Unset, data)

        last_triggered = _parse_last_triggered(d.pop("last_triggered", UNSET))

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

        monitor_view = cls(
            id=id,
            field=field,
            operator=operator,
            value=value,
            value_decimal=value_decimal,
            trigger_count=trigger_count,
            created_at=created_at,
            account_id=account_id,
            set_id=set_id,
            state=state,
            last_triggered=last_triggered,
            deleted_at=deleted_at,
        )

        monitor_view.additional_properties = d
        return monitor_view

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
