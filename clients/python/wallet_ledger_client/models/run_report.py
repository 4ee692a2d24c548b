from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.exception import Exception_
    from ..models.finding import Finding
    from ..models.matched import Matched
    from ..models.payout import Payout
    from ..models.run_report_options import RunReportOptions
    from ..models.summary import Summary


T = TypeVar("T", bound="RunReport")


@_attrs_define
class RunReport:
    """A whole run: what every report shows.

    Attributes:
        id (UUID):
        provider (str):
        key (str): SHA-256 of provider, file content and options: the same again is the same run.
        created_at (datetime.datetime):
        options (RunReportOptions): `from`, `to`, `settlement_lag_hours`, `date_tolerance_hours`, `amount_tolerance`,
            `columns`
        summary (Summary):
        exceptions (list[Exception_]):
        matched (list[Matched]):
        payouts (list[Payout]):
        invariants (list[Finding]):
    """

    id: UUID
    provider: str
    key: str
    created_at: datetime.datetime
    options: RunReportOptions
    summary: Summary
    exceptions: list[Exception_]
    matched: list[Matched]
    payouts: list[Payout]
    invariants: list[Finding]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        provider = self.provider

        key = self.key

        created_at = self.created_at.isoformat()

        options = self.options.to_dict()

        summary = self.summary.to_dict()

        exceptions = []
        for exceptions_item_data in self.exceptions:
            exceptions_item = exceptions_item_data.to_dict()
            exceptions.append(exceptions_item)

        matched = []
        for matched_item_data in self.matched:
            matched_item = matched_item_data.to_dict()
            matched.append(matched_item)

        payouts = []
        for payouts_item_data in self.payouts:
            payouts_item = payouts_item_data.to_dict()
            payouts.append(payouts_item)

        invariants = []
        for invariants_item_data in self.invariants:
            invariants_item = invariants_item_data.to_dict()
            invariants.append(invariants_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "provider": provider,
                "key": key,
                "created_at": created_at,
                "options": options,
                "summary": summary,
                "exceptions": exceptions,
                "matched": matched,
                "payouts": payouts,
                "invariants": invariants,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.exception import Exception_  # noqa: PLC0415
        from ..models.finding import Finding  # noqa: PLC0415
        from ..models.matched import Matched  # noqa: PLC0415
        from ..models.payout import Payout  # noqa: PLC0415
        from ..models.run_report_options import RunReportOptions  # noqa: PLC0415
        from ..models.summary import Summary  # noqa: PLC0415

        d = dict(src_dict)
        id = UUID(d.pop("id"))

        provider = d.pop("provider")

        key = d.pop("key")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        options = RunReportOptions.from_dict(d.pop("options"))

        summary = Summary.from_dict(d.pop("summary"))

        exceptions = []
        _exceptions = d.pop("exceptions")
        for exceptions_item_data in _exceptions:
            exceptions_item = Exception_.from_dict(exceptions_item_data)

            exceptions.append(exceptions_item)

        matched = []
        _matched = d.pop("matched")
        for matched_item_data in _matched:
            matched_item = Matched.from_dict(matched_item_data)

            matched.append(matched_item)

        payouts = []
        _payouts = d.pop("payouts")
        for payouts_item_data in _payouts:
            payouts_item = Payout.from_dict(payouts_item_data)

            payouts.append(payouts_item)

        invariants = []
        _invariants = d.pop("invariants")
        for invariants_item_data in _invariants:
            invariants_item = Finding.from_dict(invariants_item_data)

            invariants.append(invariants_item)

        run_report = cls(
            id=id,
            provider=provider,
            key=key,
            created_at=created_at,
            options=options,
            summary=summary,
            exceptions=exceptions,
            matched=matched,
            payouts=payouts,
            invariants=invariants,
        )

        run_report.additional_properties = d
        return run_report

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
