from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

from ..models.batch_mode import BatchMode

if TYPE_CHECKING:
    from ..models.create_transaction_request import CreateTransactionRequest


T = TypeVar("T", bound="BatchRequest")


@_attrs_define
class BatchRequest:
    """
    Attributes:
        mode (BatchMode):
        items (list[CreateTransactionRequest]): 1 to 1,000 bodies of `POST /v1/transactions`, each with its own `id`.
    """

    mode: BatchMode
    items: list[CreateTransactionRequest]

    def to_dict(self) -> dict[str, Any]:
        mode = self.mode.value

        items = []
        for items_item_data in self.items:
            items_item = items_item_data.to_dict()
            items.append(items_item)

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "mode": mode,
                "items": items,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.create_transaction_request import CreateTransactionRequest  # noqa: PLC0415

        d = dict(src_dict)
        mode = BatchMode(d.pop("mode"))

        items = []
        _items = d.pop("items")
        for items_item_data in _items:
            items_item = CreateTransactionRequest.from_dict(items_item_data)

            items.append(items_item)

        batch_request = cls(
            mode=mode,
            items=items,
        )

        return batch_request
