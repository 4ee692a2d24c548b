from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..models.monitor_field import MonitorField
from ..models.monitor_operator import MonitorOperator
from ..types import UNSET, Unset

T = TypeVar("T", bound="CreateMonitorRequest")


@_attrs_define
class CreateMonitorRequest:
    """
    Attributes:
        field (MonitorField): Which balance a monitor watches.
        operator (MonitorOperator): How the balance compares with the monitor's value.
        value (int): In minor units of the account's currency, within ±9007199254740991.
        id (None | Unset | UUID): The caller's id; without it an `Idempotency-Key` header derives one.
    """

    field: MonitorField
    operator: MonitorOperator
    value: int
    id: None | Unset | UUID = UNSET

    def to_dict(self) -> dict[str, Any]:
        field = self.field.value

        operator = self.operator.value

        value = self.value

        id: None | str | Unset
        if isinstance(self.id, Unset):
            id = UNSET
        elif isinstance(self.id, UUID):
            id = str(self.id)
        else:
            id = self.id

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "field": field,
                "operator": operator,
                "value": value,
            }
        )
        if id is not UNSET:
            field_dict["id"] = id

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        field = MonitorField(d.pop("field"))

        operator = MonitorOperator(d.pop("operator"))

        value = d.pop("value")

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

        create_monitor_request = cls(
            field=field,
            operator=operator,
            value=value,
            id=id,
        )

        return create_monitor_request
