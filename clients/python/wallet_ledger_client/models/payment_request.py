from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..models.currency_code import CurrencyCode
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.metadata import Metadata


T = TypeVar("T", bound="PaymentRequest")


@_attrs_define
class PaymentRequest:
    """
    Attributes:
        account (str): The wallet credited.
        amount (int): Positive minor units.
        currency (CurrencyCode): An ISO 4217 code the ledger knows.
        provider (str): The payment provider; its clearing account `clearing:{provider}:{currency}` is debited.
        id (None | Unset | UUID):
        effective_at (datetime.datetime | None | Unset): Posted transactions only: the past moment it counts from in
            balances by effective time
            (RFC 3339; default: its ledger time). Not in the future, at most the server's horizon
            (31 days by default) back; a debit dated in the past must not overdraw the wallet at any
            effective moment since.
        external_ref (None | str | Unset): The provider's reference of the payment.
        metadata (Metadata | None | Unset):
    """

    account: str
    amount: int
    currency: CurrencyCode
    provider: str
    id: None | Unset | UUID = UNSET
    effective_at: datetime.datetime | None | Unset = UNSET
    external_ref: None | str | Unset = UNSET
    metadata: Metadata | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.metadata import Metadata  # noqa: PLC0415

        account = self.account

        amount = self.amount

        currency = self.currency.value

        provider = self.provider

        id: None | str | Unset
        if isinstance(self.id, Unset):
            id = UNSET
        elif isinstance(self.id, UUID):
            id = str(self.id)
        else:
            id = self.id

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
                "account": account,
                "amount": amount,
                "currency": currency,
                "provider": provider,
            }
        )
        if id is not UNSET:
            field_dict["id"] = id
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
        account = d.pop("account")

        amount = d.pop("amount")

        currency = CurrencyCode(d.pop("currency"))

        provider = d.pop("provider")

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

        payment_request = cls(
            account=account,
            amount=amount,
            currency=currency,
            provider=provider,
            id=id,
            effective_at=effective_at,
            external_ref=external_ref,
            metadata=metadata,
        )

        return payment_request
