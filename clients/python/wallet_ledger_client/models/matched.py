from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.matched_status import MatchedStatus
from ..types import UNSET, Unset

T = TypeVar("T", bound="Matched")


@_attrs_define
class Matched:
    """A payment found on both sides and agreeing.

    Attributes:
        payment_id (UUID):
        currency (str):
        amount (str): Gross, as a decimal string in the currency's exponent.
        status (MatchedStatus): What the provider says became of a payment: paid out, given back, or never paid.
        external_ref (None | str | Unset):
        amount_minor (int | None | Unset): `amount` in minor units.
    """

    payment_id: UUID
    currency: str
    amount: str
    status: MatchedStatus
    external_ref: None | str | Unset = UNSET
    amount_minor: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        payment_id = str(self.payment_id)

        currency = self.currency

        amount = self.amount

        status = self.status.value

        external_ref: None | str | Unset
        if isinstance(self.external_ref, Unset):
            external_ref = UNSET
        else:
            external_ref = self.external_ref

        amount_minor: int | None | Unset
        if isinstance(self.amount_minor, Unset):
            amount_minor = UNSET
        else:
            amount_minor = self.amount_minor

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "payment_id": payment_id,
                "currency": currency,
                "amount": amount,
                "status": status,
            }
        )
        if external_ref is not UNSET:
            field_dict["external_ref"] = external_ref
        if amount_minor is not UNSET:
            field_dict["amount_minor"] = amount_minor

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        payment_id = UUID(d.pop("payment_id"))

        currency = d.pop("currency")

        amount = d.pop("amount")

        status = MatchedStatus(d.pop("status"))

        def _parse_external_ref(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        external_ref = _parse_external_ref(d.pop("external_ref", UNSET))

        def _parse_amount_minor(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        amount_minor = _parse_amount_minor(d.pop("amount_minor", UNSET))

        matched = cls(
            payment_id=payment_id,
            currency=currency,
            amount=amount,
            status=status,
            external_ref=external_ref,
            amount_minor=amount_minor,
        )

        matched.additional_properties = d
        return matched

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
