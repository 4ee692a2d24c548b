from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.partition_state import PartitionState


T = TypeVar("T", bound="ConsumerState")


@_attrs_define
class ConsumerState:
    """
    Attributes:
        stream (str): The base stream `serve` was given (`--stream`).
        group (str): The group the consumers use (`--group`); `groups` lists every group of each stream.
        partitions (list[PartitionState]):
    """

    stream: str
    group: str
    partitions: list[PartitionState]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        stream = self.stream

        group = self.group

        partitions = []
        for partitions_item_data in self.partitions:
            partitions_item = partitions_item_data.to_dict()
            partitions.append(partitions_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "stream": stream,
                "group": group,
                "partitions": partitions,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.partition_state import PartitionState  # noqa: PLC0415

        d = dict(src_dict)
        stream = d.pop("stream")

        group = d.pop("group")

        partitions = []
        _partitions = d.pop("partitions")
        for partitions_item_data in _partitions:
            partitions_item = PartitionState.from_dict(partitions_item_data)

            partitions.append(partitions_item)

        consumer_state = cls(
            stream=stream,
            group=group,
            partitions=partitions,
        )

        consumer_state.additional_properties = d
        return consumer_state

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
