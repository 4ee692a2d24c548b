from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.transaction_view_kind import TransactionViewKind
from ..models.transaction_view_status import TransactionViewStatus
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.exchange_view import ExchangeView
    from ..models.leg_view import LegView
    from ..models.metadata import Metadata
    from ..models.refusal_view import RefusalView


T = TypeVar("T", bound="TransactionView")


@_attrs_define
class TransactionView:
    """
    Attributes:
        id (UUID):
        kind (TransactionViewKind): Which endpoint created a transaction: `transaction`, `transfer`, `payment`,
            `reversal` or
            `exchange`.
        status (TransactionViewStatus): A transaction's status as a reader sees it: `pending` (a hold), `posted`,
            `rejected`,
            `voided` or `expired`; a pending hold past its expiry reads as `expired` before the sweeper
            marks it.
        currency (str):
        entries (list[LegView]): A posted transaction: the entries it posted (for a partly captured hold, the captured
            amount; see `authorized_amount` for what was held). Otherwise the legs as requested:
            what is held, or what was refused.
        metadata (Metadata): Any JSON object, stored and returned as sent.
        created_at (datetime.datetime):
        external_ref (None | str | Unset):
        refusal (None | RefusalView | Unset):
        posted_at (datetime.datetime | None | Unset): Ledger time: when the entries were written.
        effective_at (datetime.datetime | None | Unset): When the transaction counts in balances by effective time: the
            `effective_at` it was
            dated with, else its ledger time (`posted_at`); `null` until it is posted.
        expires_at (datetime.datetime | None | Unset): Holds: when an uncaptured hold stops counting and becomes
            `expired`.
        reverses (None | Unset | UUID): Reversals: the transaction this one gives money back for.
        captured_amount (int | None | Unset): Captured holds: how much was captured (the rest was released).
        captured_amount_decimal (None | str | Unset):
        authorized_amount (int | None | Unset): Captured holds: how much the hold reserved (its credits) before it was
            captured.
        authorized_amount_decimal (None | str | Unset):
        exchange (ExchangeView | None | Unset):
        metadata_erased_at (datetime.datetime | None | Unset): When its `metadata` was erased (`POST
            /v1/transactions/{id}/metadata-erasure`): the
            metadata is `{}` since. Absent while it was not.
    """

    id: UUID
    kind: TransactionViewKind
    status: TransactionViewStatus
    currency: str
    entries: list[LegView]
    metadata: Metadata
    created_at: datetime.datetime
    external_ref: None | str | Unset = UNSET
    refusal: None | RefusalView | Unset = UNSET
    posted_at: datetime.datetime | None | Unset = UNSET
    effective_at: datetime.datetime | None | Unset = UNSET
    expires_at: datetime.datetime | None | Unset = UNSET
    reverses: None | Unset | UUID = UNSET
    captured_amount: int | None | Unset = UNSET
    captured_amount_decimal: None | str | Unset = UNSET
    authorized_amount: int | None | Unset = UNSET
    authorized_amount_decimal: None | str | Unset = UNSET
    exchange: ExchangeView | None | Unset = UNSET
    metadata_erased_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.exchange_view import ExchangeView  # noqa: PLC0415
        from ..models.refusal_view import RefusalView  # noqa: PLC0415

        id = str(self.id)

        kind = self.kind.value

        status = self.status.value

        currency = self.currency

        entries = []
        for entries_item_data in self.entries:
            entries_item = entries_item_data.to_dict()
            entries.append(entries_item)

        metadata = self.metadata.to_dict()

        created_at = self.created_at.isoformat()

        external_ref: None | str | Unset
        if isinstance(self.external_ref, Unset):
            external_ref = UNSET
        else:
            external_ref = self.external_ref

        refusal: dict[str, Any] | None | Unset
        if isinstance(self.refusal, Unset):
            refusal = UNSET
        elif isinstance(self.refusal, RefusalView):
            refusal = self.refusal.to_dict()
        else:
            refusal = self.refusal

        posted_at: None | str | Unset
        if isinstance(self.posted_at, Unset):
            posted_at = UNSET
        elif isinstance(self.posted_at, datetime.datetime):
            posted_at = self.posted_at.isoformat()
        else:
            posted_at = self.posted_at

        effective_at: None | str | Unset
        if isinstance(self.effective_at, Unset):
            effective_at = UNSET
        elif isinstance(self.effective_at, datetime.datetime):
            effective_at = self.effective_at.isoformat()
        else:
            effective_at = self.effective_at

        expires_at: None | str | Unset
        if isinstance(self.expires_at, Unset):
            expires_at = UNSET
        elif isinstance(self.expires_at, datetime.datetime):
            expires_at = self.expires_at.isoformat()
        else:
            expires_at = self.expires_at

        reverses: None | str | Unset
        if isinstance(self.reverses, Unset):
            reverses = UNSET
        elif isinstance(self.reverses, UUID):
            reverses = str(self.reverses)
        else:
            reverses = self.reverses

        captured_amount: int | None | Unset
        if isinstance(self.captured_amount, Unset):
            captured_amount = UNSET
        else:
            captured_amount = self.captured_amount

        captured_amount_decimal: None | str | Unset
        if isinstance(self.captured_amount_decimal, Unset):
            captured_amount_decimal = UNSET
        else:
            captured_amount_decimal = self.captured_amount_decimal

        authorized_amount: int | None | Unset
        if isinstance(self.authorized_amount, Unset):
            authorized_amount = UNSET
        else:
            authorized_amount = self.authorized_amount

        authorized_amount_decimal: None | str | Unset
        if isinstance(self.authorized_amount_decimal, Unset):
            authorized_amount_decimal = UNSET
        else:
            authorized_amount_decimal = self.authorized_amount_decimal

        exchange: dict[str, Any] | None | Unset
        if isinstance(self.exchange, Unset):
            exchange = UNSET
        elif isinstance(self.exchange, ExchangeView):
            exchange = self.exchange.to_dict()
        else:
            exchange = self.exchange

        metadata_erased_at: None | str | Unset
        if isinstance(self.metadata_erased_at, Unset):
            metadata_erased_at = UNSET
        elif isinstance(self.metadata_erased_at, datetime.datetime):
            metadata_erased_at = self.metadata_erased_at.isoformat()
        else:
            metadata_erased_at = self.metadata_erased_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "kind": kind,
                "status": status,
                "currency": currency,
                "entries": entries,
                "metadata": metadata,
                "created_at": created_at,
            }
        )
        if external_ref is not UNSET:
            field_dict["external_ref"] = external_ref
        if refusal is not UNSET:
            field_dict["refusal"] = refusal
        if posted_at is not UNSET:
            field_dict["posted_at"] = posted_at
        if effective_at is not UNSET:
            field_dict["effective_at"] = effective_at
        if expires_at is not UNSET:
            field_dict["expires_at"] = expires_at
        if reverses is not UNSET:
            field_dict["reverses"] = reverses
        if captured_amount is not UNSET:
            field_dict["captured_amount"] = captured_amount
        if captured_amount_decimal is not UNSET:
            field_dict["captured_amount_decimal"] = captured_amount_decimal
        if authorized_amount is not UNSET:
            field_dict["authorized_amount"] = authorized_amount
        if authorized_amount_decimal is not UNSET:
            field_dict["authorized_amount_decimal"] = authorized_amount_decimal
        if exchange is not UNSET:
            field_dict["exchange"] = exchange
        if metadata_erased_at is not UNSET:
            field_dict["metadata_erased_at"] = metadata_erased_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.exchange_view import ExchangeView  # noqa: PLC0415
        from ..models.leg_view import LegView  # noqa: PLC0415
        from ..models.metadata import Metadata  # noqa: PLC0415
        from ..models.refusal_view import RefusalView  # noqa: PLC0415

        d = dict(src_dict)
        id = UUID(d.pop("id"))

        kind = TransactionViewKind(d.pop("kind"))

        status = TransactionViewStatus(d.pop("status"))

        currency = d.pop("currency")

        entries = []
        _entries = d.pop("entries")
        for entries_item_data in _entries:
            entries_item = LegView.from_dict(entries_item_data)

            entries.append(entries_item)

        metadata = Metadata.from_dict(d.pop("metadata"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        def _parse_external_ref(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        external_ref = _parse_external_ref(d.pop("external_ref", UNSET))

        def _parse_refusal(data: object) -> None | RefusalView | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                refusal_type_0 = RefusalView.from_dict(data)

                return refusal_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RefusalView | Unset, data)

        refusal = _parse_refusal(d.pop("refusal", UNSET))

        def _parse_posted_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                posted_at_type_0 = datetime.datetime.fromisoformat(data)

                return posted_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        posted_at = _parse_posted_at(d.pop("posted_at", UNSET))

        def _parse_effective_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                effective_at_type_0 = datetime.datetime.fromisoformat(data)

                return effective_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        effective_at = _parse_effective_at(d.pop("effective_at", UNSET))

        def _parse_expires_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                expires_at_type_0 = datetime.datetime.fromisoformat(data)

                return expires_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        expires_at = _parse_expires_at(d.pop("expires_at", UNSET))

        def _parse_reverses(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                reverses_type_0 = UUID(data)

                return reverses_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        reverses = _parse_reverses(d.pop("reverses", UNSET))

        def _parse_captured_amount(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        captured_amount = _parse_captured_amount(d.pop("captured_amount", UNSET))

        def _parse_captured_amount_decimal(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        captured_amount_decimal = _parse_captured_amount_decimal(d.pop("captured_amount_decimal", UNSET))

        def _parse_authorized_amount(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        authorized_amount = _parse_authorized_amount(d.pop("authorized_amount", UNSET))

        def _parse_authorized_amount_decimal(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        authorized_amount_decimal = _parse_authorized_amount_decimal(d.pop("authorized_amount_decimal", UNSET))

        def _parse_exchange(data: object) -> ExchangeView | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                exchange_type_0 = ExchangeView.from_dict(data)

                return exchange_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ExchangeView | None | Unset, data)

        exchange = _parse_exchange(d.pop("exchange", UNSET))

        def _parse_metadata_erased_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                metadata_erased_at_type_0 = datetime.datetime.fromisoformat(data)

                return metadata_erased_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        metadata_erased_at = _parse_metadata_erased_at(d.pop("metadata_erased_at", UNSET))

        transaction_view = cls(
            id=id,
            kind=kind,
            status=status,
            currency=currency,
            entries=entries,
            metadata=metadata,
            created_at=created_at,
            external_ref=external_ref,
            refusal=refusal,
            posted_at=posted_at,
            effective_at=effective_at,
            expires_at=expires_at,
            reverses=reverses,
            captured_amount=captured_amount,
            captured_amount_decimal=captured_amount_decimal,
            authorized_amount=authorized_amount,
            authorized_amount_decimal=authorized_amount_decimal,
            exchange=exchange,
            metadata_erased_at=metadata_erased_at,
        )

        transaction_view.additional_properties = d
        return transaction_view

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
