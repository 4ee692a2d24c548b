from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="SubscriptionView")


@_attrs_define
class SubscriptionView:
    """A subscription as the API shows it. `secret` appears only in the answers that create or
    rotate it: it is the caller's one chance to read it.

        Attributes:
            id (UUID):
            url (str):
            event_types (list[str]): Empty: every event type.
            status (str): `active` or `deleted`.
            active_secrets (int): How many secrets sign each delivery: 2 during a rotation.
            created_at (datetime.datetime):
            updated_at (datetime.datetime):
            secret (None | str | Unset):
    """

    id: UUID
    url: str
    event_types: list[str]
    status: str
    active_secrets: int
    created_at: datetime.datetime
    updated_at: datetime.datetime
    secret: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        url = self.url

        event_types = self.event_types

        status = self.status

        active_secrets = self.active_secrets

        created_at = self.created_at.isoformat()

        updated_at = self.updated_at.isoformat()

        secret: None | str | Unset
        if isinstance(self.secret, Unset):
            secret = UNSET
        else:
            secret = self.secret

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "url": url,
                "event_types": event_types,
                "status": status,
                "active_secrets": active_secrets,
                "created_at": created_at,
                "updated_at": updated_at,
            }
        )
        if secret is not UNSET:
            field_dict["secret"] = secret

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = UUID(d.pop("id"))

        url = d.pop("url")

        event_types = cast(list[str], d.pop("event_types"))

        status = d.pop("status")

        active_secrets = d.pop("active_secrets")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        def _parse_secret(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        secret = _parse_secret(d.pop("secret", UNSET))

        subscription_view = cls(
            id=id,
            url=url,
            event_types=event_types,
            status=status,
            active_secrets=active_secrets,
            created_at=created_at,
            updated_at=updated_at,
            secret=secret,
        )

        subscription_view.additional_properties = d
        return subscription_view

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
