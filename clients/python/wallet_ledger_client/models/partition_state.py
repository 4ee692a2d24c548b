from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.group_state import GroupState


T = TypeVar("T", bound="PartitionState")


@_attrs_define
class PartitionState:
    """
    Attributes:
        partition (int):
        stream (str):
        length (int): Entries in the stream (0 when it does not exist yet).
        dead_letters (int): Entries in `<stream>.dlq`.
        groups (list[GroupState]):
    """

    partition: int
    stream: str
    length: int
    dead_letters: int
    groups: list[GroupState]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        partition = self.partition

        stream = self.stream

        length = self.length

        dead_letters = self.dead_letters

        groups = []
        for groups_item_data in self.groups:
            groups_item = groups_item_data.to_dict()
            groups.append(groups_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "partition": partition,
                "stream": stream,
                "length": length,
                "dead_letters": dead_letters,
                "groups": groups,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.group_state import GroupState  # noqa: PLC0415

        d = dict(src_dict)
        partition = d.pop("partition")

        stream = d.pop("stream")

        length = d.pop("length")

        dead_letters = d.pop("dead_letters")

        groups = []
        _groups = d.pop("groups")
        for groups_item_data in _groups:
            groups_item = GroupState.from_dict(groups_item_data)

            groups.append(groups_item)

        partition_state = cls(
            partition=partition,
            stream=stream,
            length=length,
            dead_letters=dead_letters,
            groups=groups,
        )

        partition_state.additional_properties = d
        return partition_state

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
