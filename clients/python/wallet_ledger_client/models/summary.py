from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.currency_totals import CurrencyTotals
    from ..models.summary_exceptions import SummaryExceptions


T = TypeVar("T", bound="Summary")


@_attrs_define
class Summary:
    """
    Attributes:
        provider (str):
        file_rows (int): Data lines in the file (header excluded), and how many parsed.
        parsed_rows (int):
        ledger_payments (int): Ledger payments through the provider's clearing accounts in the period.
        matched (int):
        exceptions (SummaryExceptions): Every exception code with its exact count (zero included).
        totals (list[CurrencyTotals]): Gross, fee and net of the file per currency, as decimal strings.
        invariant_findings (int): Broken ledger invariants found by the same run (see `verify`).
        period_from (datetime.datetime | None | Unset): The settlement period the ledger side was taken from (after the
            settlement lag).
        period_to (datetime.datetime | None | Unset):
        exceptions_listed (int | None | Unset): How many of them the run lists in `exceptions`: at most
            `MAX_LISTED_EXCEPTIONS_PER_CODE` (1,000) of each code, the first found. A fresh run's
            exceptions.csv lists them all. `null` in runs stored before the limit.
        payouts_total (int | None | Unset): How many payouts the file has; `payouts` lists at most `MAX_LISTED_PAYOUTS`
            (10,000),
            the disagreeing ones first. `null` in runs stored before the limit.
    """

    provider: str
    file_rows: int
    parsed_rows: int
    ledger_payments: int
    matched: int
    exceptions: SummaryExceptions
    totals: list[CurrencyTotals]
    invariant_findings: int
    period_from: datetime.datetime | None | Unset = UNSET
    period_to: datetime.datetime | None | Unset = UNSET
    exceptions_listed: int | None | Unset = UNSET
    payouts_total: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        provider = self.provider

        file_rows = self.file_rows

        parsed_rows = self.parsed_rows

        ledger_payments = self.ledger_payments

        matched = self.matched

        exceptions = self.exceptions.to_dict()

        totals = []
        for totals_item_data in self.totals:
            totals_item = totals_item_data.to_dict()
            totals.append(totals_item)

        invariant_findings = self.invariant_findings

        period_from: None | str | Unset
        if isinstance(self.period_from, Unset):
            period_from = UNSET
        elif isinstance(self.period_from, datetime.datetime):
            period_from = self.period_from.isoformat()
        else:
            period_from = self.period_from

        period_to: None | str | Unset
        if isinstance(self.period_to, Unset):
            period_to = UNSET
        elif isinstance(self.period_to, datetime.datetime):
            period_to = self.period_to.isoformat()
        else:
            period_to = self.period_to

        exceptions_listed: int | None | Unset
        if isinstance(self.exceptions_listed, Unset):
            exceptions_listed = UNSET
        else:
            exceptions_listed = self.exceptions_listed

        payouts_total: int | None | Unset
        if isinstance(self.payouts_total, Unset):
            payouts_total = UNSET
        else:
            payouts_total = self.payouts_total

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "provider": provider,
                "file_rows": file_rows,
                "parsed_rows": parsed_rows,
                "ledger_payments": ledger_payments,
                "matched": matched,
                "exceptions": exceptions,
                "totals": totals,
                "invariant_findings": invariant_findings,
            }
        )
        if period_from is not UNSET:
            field_dict["period_from"] = period_from
        if period_to is not UNSET:
            field_dict["period_to"] = period_to
        if exceptions_listed is not UNSET:
            field_dict["exceptions_listed"] = exceptions_listed
        if payouts_total is not UNSET:
            field_dict["payouts_total"] = payouts_total

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.currency_totals import CurrencyTotals  # noqa: PLC0415
        from ..models.summary_exceptions import SummaryExceptions  # noqa: PLC0415

        d = dict(src_dict)
        provider = d.pop("provider")

        file_rows = d.pop("file_rows")

        parsed_rows = d.pop("parsed_rows")

        ledger_payments = d.pop("ledger_payments")

        matched = d.pop("matched")

        exceptions = SummaryExceptions.from_dict(d.pop("exceptions"))

        totals = []
        _totals = d.pop("totals")
        for totals_item_data in _totals:
            totals_item = CurrencyTotals.from_dict(totals_item_data)

            totals.append(totals_item)

        invariant_findings = d.pop("invariant_findings")

        def _parse_period_from(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                period_from_type_0 = datetime.datetime.fromisoformat(data)

                return period_from_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        period_from = _parse_period_from(d.pop("period_from", UNSET))

        def _parse_period_to(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                period_to_type_0 = datetime.datetime.fromisoformat(data)

                return period_to_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        period_to = _parse_period_to(d.pop("period_to", UNSET))

        def _parse_exceptions_listed(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        exceptions_listed = _parse_exceptions_listed(d.pop("exceptions_listed", UNSET))

        def _parse_payouts_total(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        payouts_total = _parse_payouts_total(d.pop("payouts_total", UNSET))

        summary = cls(
            provider=provider,
            file_rows=file_rows,
            parsed_rows=parsed_rows,
            ledger_payments=ledger_payments,
            matched=matched,
            exceptions=exceptions,
            totals=totals,
            invariant_findings=invariant_findings,
            period_from=period_from,
            period_to=period_to,
            exceptions_listed=exceptions_listed,
            payouts_total=payouts_total,
        )

        summary.additional_properties = d
        return summary

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
