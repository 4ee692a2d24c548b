from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="LifecycleRequest")


@_attrs_define
class LifecycleRequest:
    """The body of freeze, unfreeze and close: nothing, or `{}`. Held to the rules of every other
    body (JSON, no unknown field), so that a request meant for another endpoint is refused,
    not silently applied as a bare transition.

    """

    def to_dict(self) -> dict[str, Any]:

        field_dict: dict[str, Any] = {}

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        lifecycle_request = cls()

        return lifecycle_request
