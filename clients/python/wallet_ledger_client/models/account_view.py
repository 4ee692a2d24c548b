from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.account_view_status import AccountViewStatus
from ..models.account_view_type import AccountViewType
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.balances_view import BalancesView
    from ..models.metadata import Metadata


T = TypeVar("T", bound="AccountView")


@_attrs_define
class AccountView:
    """
    Attributes:
        id (str):
        currency (str):
        type_ (AccountViewType): What an account is: `wallet` (a customer's balance, with its limits) or `system` (the
            ledger's own accounts, e.g. a provider's clearing account).
        status (AccountViewStatus): Where an account is in its lifecycle: `active`, then `frozen` (no debits) and back,
            or
            `closed` for good.
        overdraft_limit (int):
        overdraft_limit_decimal (str):
        metadata (Metadata): Any JSON object, stored and returned as sent.
        version (int):
        balances (BalancesView):
        created_at (datetime.datetime):
        updated_at (datetime.datetime):
        as_of (datetime.datetime | None | Unset): The moment these balances describe: the `as_of` asked for, or the
            finality horizon
            when that is earlier (an instant not final yet is answered at the horizon).
    """

    id: str
    currency: str
    type_: AccountViewType
    status: AccountViewStatus
    overdraft_limit: int
    overdraft_limit_decimal: str
    metadata: Metadata
    version: int
    balances: BalancesView
    created_at: datetime.datetime
    updated_at: datetime.datetime
    as_of: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        currency = self.currency

        type_ = self.type_.value

        status = self.status.value

        overdraft_limit = self.overdraft_limit

        overdraft_limit_decimal = self.overdraft_limit_decimal

        metadata = self.metadata.to_dict()

        version = self.version

        balances = self.balances.to_dict()

        created_at = self.created_at.isoformat()

        updated_at = self.updated_at.isoformat()

        as_of: None | str | Unset
        if isinstance(self.as_of, Unset):
            as_of = UNSET
        elif isinstance(self.as_of, datetime.datetime):
            as_of = self.as_of.isoformat()
        else:
            as_of = self.as_of

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "currency": currency,
                "type": type_,
                "status": status,
                "overdraft_limit": overdraft_limit,
                "overdraft_limit_decimal": overdraft_limit_decimal,
                "metadata": metadata,
                "version": version,
                "balances": balances,
                "created_at": created_at,
                "updated_at": updated_at,
            }
        )
        if as_of is not UNSET:
            field_dict["as_of"] = as_of

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.balances_view import BalancesView  # noqa: PLC0415
        from ..models.metadata import Metadata  # noqa: PLC0415

        d = dict(src_dict)
        id = d.pop("id")

        currency = d.pop("currency")

        type_ = AccountViewType(d.pop("type"))

        status = AccountViewStatus(d.pop("status"))

        overdraft_limit = d.pop("overdraft_limit")

        overdraft_limit_decimal = d.pop("overdraft_limit_decimal")

        metadata = Metadata.from_dict(d.pop("metadata"))

        version = d.pop("version")

        balances = BalancesView.from_dict(d.pop("balances"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        def _parse_as_of(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                as_of_type_0 = datetime.datetime.fromisoformat(data)

                return as_of_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        as_of = _parse_as_of(d.pop("as_of", UNSET))

        account_view = cls(
            id=id,
            currency=currency,
            type_=type_,
            status=status,
            overdraft_limit=overdraft_limit,
            overdraft_limit_decimal=overdraft_limit_decimal,
            metadata=metadata,
            version=version,
            balances=balances,
            created_at=created_at,
            updated_at=updated_at,
            as_of=as_of,
        )

        account_view.additional_properties = d
        return account_view

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
