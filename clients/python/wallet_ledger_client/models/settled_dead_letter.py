from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.settle_outcome import SettleOutcome
from ..types import UNSET, Unset

T = TypeVar("T", bound="SettledDeadLetter")


@_attrs_define
class SettledDeadLetter:
    """
    Attributes:
        outcome (SettleOutcome): What a replay or a drop did.
        partition (int):
        stream (str):
        id (str):
        replayed_as (None | str | Unset): For a replay: the entry id the event was published again under; `null` for a
            drop.
    """

    outcome: SettleOutcome
    partition: int
    stream: str
    id: str
    replayed_as: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        outcome = self.outcome.value

        partition = self.partition

        stream = self.stream

        id = self.id

        replayed_as: None | str | Unset
        if isinstance(self.replayed_as, Unset):
            replayed_as = UNSET
        else:
            replayed_as = self.replayed_as

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "outcome": outcome,
                "partition": partition,
                "stream": stream,
                "id": id,
            }
        )
        if replayed_as is not UNSET:
            field_dict["replayed_as"] = replayed_as

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        outcome = SettleOutcome(d.pop("outcome"))

        partition = d.pop("partition")

        stream = d.pop("stream")

        id = d.pop("id")

        def _parse_replayed_as(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        replayed_as = _parse_replayed_as(d.pop("replayed_as", UNSET))

        settled_dead_letter = cls(
            outcome=outcome,
            partition=partition,
            stream=stream,
            id=id,
            replayed_as=replayed_as,
        )

        settled_dead_letter.additional_properties = d
        return settled_dead_letter

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
