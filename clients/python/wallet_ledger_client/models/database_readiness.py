from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="DatabaseReadiness")


@_attrs_define
class DatabaseReadiness:
    """
    Attributes:
        synchronous_standby (bool | None | Unset): Whether commits wait for a synchronous standby; `null` when it could
            not be told.
        primary (None | str | Unset): With several hosts: the one written to (`host:port`).
    """

    synchronous_standby: bool | None | Unset = UNSET
    primary: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        synchronous_standby: bool | None | Unset
        if isinstance(self.synchronous_standby, Unset):
            synchronous_standby = UNSET
        else:
            synchronous_standby = self.synchronous_standby

        primary: None | str | Unset
        if isinstance(self.primary, Unset):
            primary = UNSET
        else:
            primary = self.primary

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if synchronous_standby is not UNSET:
            field_dict["synchronous_standby"] = synchronous_standby
        if primary is not UNSET:
            field_dict["primary"] = primary

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_synchronous_standby(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        synchronous_standby = _parse_synchronous_standby(d.pop("synchronous_standby", UNSET))

        def _parse_primary(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        primary = _parse_primary(d.pop("primary", UNSET))

        database_readiness = cls(
            synchronous_standby=synchronous_standby,
            primary=primary,
        )

        database_readiness.additional_properties = d
        return database_readiness

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
