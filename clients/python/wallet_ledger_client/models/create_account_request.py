from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.account_type_request import AccountTypeRequest
from ..models.currency_code import CurrencyCode
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.metadata import Metadata


T = TypeVar("T", bound="CreateAccountRequest")


@_attrs_define
class CreateAccountRequest:
    """
    Attributes:
        currency (CurrencyCode): An ISO 4217 code the ledger knows.
        type_ (AccountTypeRequest):
        id (None | str | Unset): The caller's id, `[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}`. Without it, an
            `Idempotency-Key` header derives one (a UUID).
        overdraft_limit (int | None | Unset): Wallets only: how far below zero the wallet may go, in minor units
            (default 0).
        metadata (Metadata | None | Unset):
    """

    currency: CurrencyCode
    type_: AccountTypeRequest
    id: None | str | Unset = UNSET
    overdraft_limit: int | None | Unset = UNSET
    metadata: Metadata | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.metadata import Metadata  # noqa: PLC0415

        currency = self.currency.value

        type_ = self.type_.value

        id: None | str | Unset
        if isinstance(self.id, Unset):
            id = UNSET
        else:
            id = self.id

        overdraft_limit: int | None | Unset
        if isinstance(self.overdraft_limit, Unset):
            overdraft_limit = UNSET
        else:
            overdraft_limit = self.overdraft_limit

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
                "currency": currency,
                "type": type_,
            }
        )
        if id is not UNSET:
            field_dict["id"] = id
        if overdraft_limit is not UNSET:
            field_dict["overdraft_limit"] = overdraft_limit
        if metadata is not UNSET:
            field_dict["metadata"] = metadata

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.metadata import Metadata  # noqa: PLC0415

        d = dict(src_dict)
        currency = CurrencyCode(d.pop("currency"))

        type_ = AccountTypeRequest(d.pop("type"))

        def _parse_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        id = _parse_id(d.pop("id", UNSET))

        def _parse_overdraft_limit(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        overdraft_limit = _parse_overdraft_limit(d.pop("overdraft_limit", UNSET))

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

        create_account_request = cls(
            currency=currency,
            type_=type_,
            id=id,
            overdraft_limit=overdraft_limit,
            metadata=metadata,
        )

        return create_account_request
