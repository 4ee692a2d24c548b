from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.reason import Reason
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.dead_letter_event import DeadLetterEvent


T = TypeVar("T", bound="DeadLetter")


@_attrs_define
class DeadLetter:
    """One dead letter: why the consumer gave up on the event, and the event as it was sent.

    Attributes:
        partition (int): The partition (0 with one stream).
        stream (str): The partition's stream (`payments`, or `payments:{2}` with several).
        id (str): The entry id in `<stream>.dlq`. Example: 1796016587604-0.
        differing_fields (list[str]): For `idempotency_mismatch`: the event's fields that differ from the stored payment
            (`amount`, `wallet`); empty otherwise.
        event (DeadLetterEvent): The event's fields as the producer sent them (bytes that are not UTF-8 as U+FFFD).
        reason (None | Reason | Unset):
        detail (None | str | Unset):
        original_id (None | str | Unset): The event's entry id in the stream when it was dead-lettered.
        group (None | str | Unset):
        consumer (None | str | Unset):
        failures (int | None | Unset): Failures the event itself caused before it was dead-lettered.
        dead_lettered_at (datetime.datetime | None | Unset):
    """

    partition: int
    stream: str
    id: str
    differing_fields: list[str]
    event: DeadLetterEvent
    reason: None | Reason | Unset = UNSET
    detail: None | str | Unset = UNSET
    original_id: None | str | Unset = UNSET
    group: None | str | Unset = UNSET
    consumer: None | str | Unset = UNSET
    failures: int | None | Unset = UNSET
    dead_lettered_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        partition = self.partition

        stream = self.stream

        id = self.id

        differing_fields = self.differing_fields

        event = self.event.to_dict()

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        elif isinstance(self.reason, Reason):
            reason = self.reason.value
        else:
            reason = self.reason

        detail: None | str | Unset
        if isinstance(self.detail, Unset):
            detail = UNSET
        else:
            detail = self.detail

        original_id: None | str | Unset
        if isinstance(self.original_id, Unset):
            original_id = UNSET
        else:
            original_id = self.original_id

        group: None | str | Unset
        if isinstance(self.group, Unset):
            group = UNSET
        else:
            group = self.group

        consumer: None | str | Unset
        if isinstance(self.consumer, Unset):
            consumer = UNSET
        else:
            consumer = self.consumer

        failures: int | None | Unset
        if isinstance(self.failures, Unset):
            failures = UNSET
        else:
            failures = self.failures

        dead_lettered_at: None | str | Unset
        if isinstance(self.dead_lettered_at, Unset):
            dead_lettered_at = UNSET
        elif isinstance(self.dead_lettered_at, datetime.datetime):
            dead_lettered_at = self.dead_lettered_at.isoformat()
        else:
            dead_lettered_at = self.dead_lettered_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "partition": partition,
                "stream": stream,
                "id": id,
                "differing_fields": differing_fields,
                "event": event,
            }
        )
        if reason is not UNSET:
            field_dict["reason"] = reason
        if detail is not UNSET:
            field_dict["detail"] = detail
        if original_id is not UNSET:
            field_dict["original_id"] = original_id
        if group is not UNSET:
            field_dict["group"] = group
        if consumer is not UNSET:
            field_dict["consumer"] = consumer
        if failures is not UNSET:
            field_dict["failures"] = failures
        if dead_lettered_at is not UNSET:
            field_dict["dead_lettered_at"] = dead_lettered_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.dead_letter_event import DeadLetterEvent  # noqa: PLC0415

        d = dict(src_dict)
        partition = d.pop("partition")

        stream = d.pop("stream")

        id = d.pop("id")

        differing_fields = cast(list[str], d.pop("differing_fields"))

        event = DeadLetterEvent.from_dict(d.pop("event"))

        def _parse_reason(data: object) -> None | Reason | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                reason_type_0 = Reason(data)

                return reason_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Reason | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))

        def _parse_detail(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        detail = _parse_detail(d.pop("detail", UNSET))

        def _parse_original_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        original_id = _parse_original_id(d.pop("original_id", UNSET))

        def _parse_group(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        group = _parse_group(d.pop("group", UNSET))

        def _parse_consumer(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        consumer = _parse_consumer(d.pop("consumer", UNSET))

        def _parse_failures(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        failures = _parse_failures(d.pop("failures", UNSET))

        def _parse_dead_lettered_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                dead_lettered_at_type_0 = datetime.datetime.fromisoformat(data)

                return dead_lettered_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        dead_lettered_at = _parse_dead_lettered_at(d.pop("dead_lettered_at", UNSET))

        dead_letter = cls(
            partition=partition,
            stream=stream,
            id=id,
            differing_fields=differing_fields,
            event=event,
            reason=reason,
            detail=detail,
            original_id=original_id,
            group=group,
            consumer=consumer,
            failures=failures,
            dead_lettered_at=dead_lettered_at,
        )

        dead_letter.additional_properties = d
        return dead_letter

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
