from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..models.currency_code import CurrencyCode
from ..models.requested_status import RequestedStatus
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.metadata import Metadata


T = TypeVar("T", bound="ExchangeRequest")


@_attrs_define
class ExchangeRequest:
    """
    Attributes:
        from_ (str): The account debited `amount`, in `currency`.
        to (str): The account credited the counter amount, in `counter_currency`.
        amount (int): Positive minor units of `currency` debited from `from`.
        currency (CurrencyCode): An ISO 4217 code the ledger knows.
        counter_currency (CurrencyCode): An ISO 4217 code the ledger knows.
        id (None | Unset | UUID):
        rate (None | str | Unset): Units of `counter_currency` one unit of `currency` buys (major units), as a decimal
            string: at most 18 significant digits and 18 decimal places (`"1.0842"`). Without
            `counter_amount`, the counter amount is `amount` at this rate rounded half up.
        counter_amount (int | None | Unset): Positive minor units of `counter_currency` credited to `to`. With `rate`,
            it must be
            `amount` at that rate rounded either way (`rate_mismatch` otherwise); alone, it implies
            the rate.
        status (None | RequestedStatus | Unset):
        expires_at (datetime.datetime | None | Unset): Holds only: when the hold expires (default: the server's hold
            expiry from now).
        effective_at (datetime.datetime | None | Unset): Posted exchanges only: the past moment it counts from in
            balances by effective time
            (see `POST /v1/transfers`).
        external_ref (None | str | Unset):
        metadata (Metadata | None | Unset):
    """

    from_: str
    to: str
    amount: int
    currency: CurrencyCode
    counter_currency: CurrencyCode
    id: None | Unset | UUID = UNSET
    rate: None | str | Unset = UNSET
    counter_amount: int | None | Unset = UNSET
    status: None | RequestedStatus | Unset = UNSET
    expires_at: datetime.datetime | None | Unset = UNSET
    effective_at: datetime.datetime | None | Unset = UNSET
    external_ref: None | str | Unset = UNSET
    metadata: Metadata | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.metadata import Metadata  # noqa: PLC0415

        from_ = self.from_

        to = self.to

        amount = self.amount

        currency = self.currency.value

        counter_currency = self.counter_currency.value

        id: None | str | Unset
        if isinstance(self.id, Unset):
            id = UNSET
        elif isinstance(self.id, UUID):
            id = str(self.id)
        else:
            id = self.id

        rate: None | str | Unset
        if isinstance(self.rate, Unset):
            rate = UNSET
        else:
            rate = self.rate

        counter_amount: int | None | Unset
        if isinstance(self.counter_amount, Unset):
            counter_amount = UNSET
        else:
            counter_amount = self.counter_amount

        status: None | str | Unset
        if isinstance(self.status, Unset):
            status = UNSET
        elif isinstance(self.status, RequestedStatus):
            status = self.status.value
        else:
            status = self.status

        expires_at: None | str | Unset
        if isinstance(self.expires_at, Unset):
            expires_at = UNSET
        elif isinstance(self.expires_at, datetime.datetime):
            expires_at = self.expires_at.isoformat()
        else:
            expires_at = self.expires_at

        effective_at: None | str | Unset
        if isinstance(self.effective_at, Unset):
            effective_at = UNSET
        elif isinstance(self.effective_at, datetime.datetime):
            effective_at = self.effective_at.isoformat()
        else:
            effective_at = self.effective_at

        external_ref: None | str | Unset
        if isinstance(self.external_ref, Unset):
            external_ref = UNSET
        else:
            external_ref = self.external_ref

        metadata: dict[str, Any] | None | Unset
        if isinstance(self.metadata, Unset):
            metadata = UNSET
        elif isinstance(self.metadata, Metadata):
            metadata = self.metadata.to_dict()
        else:
            metadata = self.metadata

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "from": from_,
                "to": to,
                "amount": amount,
                "currency": currency,
                "counter_currency": counter_currency,
            }
        )
        if id is not UNSET:
            field_dict["id"] = id
        if rate is not UNSET:
            field_dict["rate"] = rate
        if counter_amount is not UNSET:
            field_dict["counter_amount"] = counter_amount
        if status is not UNSET:
            field_dict["status"] = status
        if expires_at is not UNSET:
            field_dict["expires_at"] = expires_at
        if effective_at is not UNSET:
            field_dict["effective_at"] = effective_at
        if external_ref is not UNSET:
            field_dict["external_ref"] = external_ref
        if metadata is not UNSET:
            field_dict["metadata"] = metadata

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.metadata import Metadata  # noqa: PLC0415

        d = dict(src_dict)
        from_ = d.pop("from")

        to = d.pop("to")

        amount = d.pop("amount")

        currency = CurrencyCode(d.pop("currency"))

        counter_currency = CurrencyCode(d.pop("counter_currency"))

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

        def _parse_rate(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        rate = _parse_rate(d.pop("rate", UNSET))

        def _parse_counter_amount(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        counter_amount = _parse_counter_amount(d.pop("counter_amount", UNSET))

        def _parse_status(data: object) -> None | RequestedStatus | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                status_type_0 = RequestedStatus(data)

                return status_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RequestedStatus | Unset, data)

        status = _parse_status(d.pop("status", UNSET))

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

        def _parse_external_ref(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        external_ref = _parse_external_ref(d.pop("external_ref", UNSET))

        def _parse_metadata(data: object) -> Metadata | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                metadata_type_0 = Metadata.from_dict(data)

                return metadata_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Metadata | None | Unset, data)

        metadata = _parse_metadata(d.pop("metadata", UNSET))

        exchange_request = cls(
            from_=from_,
            to=to,
            amount=amount,
            currency=currency,
            counter_currency=counter_currency,
            id=id,
            rate=rate,
            counter_amount=counter_amount,
            status=status,
            expires_at=expires_at,
            effective_at=effective_at,
            external_ref=external_ref,
            metadata=metadata,
        )

        return exchange_request
