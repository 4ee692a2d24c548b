from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.bucket import Bucket
from ..models.window import Window

if TYPE_CHECKING:
    from ..models.volume_bucket import VolumeBucket


T = TypeVar("T", bound="Volumes")


@_attrs_define
class Volumes:
    """
    Attributes:
        window (Window): How far back the volumes reach.
        bucket (Bucket): How wide one bucket is.
        from_ (datetime.datetime): The start of the first bucket.
        to (datetime.datetime): Now: the last bucket is the current one, still filling.
        data (list[VolumeBucket]): The buckets with something in them, oldest first, then by currency.
    """

    window: Window
    bucket: Bucket
    from_: datetime.datetime
    to: datetime.datetime
    data: list[VolumeBucket]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        window = self.window.value

        bucket = self.bucket.value

        from_ = self.from_.isoformat()

        to = self.to.isoformat()

        data = []
        for data_item_data in self.data:
            data_item = data_item_data.to_dict()
            data.append(data_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "window": window,
                "bucket": bucket,
                "from": from_,
                "to": to,
                "data": data,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.volume_bucket import VolumeBucket  # noqa: PLC0415

        d = dict(src_dict)
        window = Window(d.pop("window"))

        bucket = Bucket(d.pop("bucket"))

        from_ = datetime.datetime.fromisoformat(d.pop("from"))

        to = datetime.datetime.fromisoformat(d.pop("to"))

        data = []
        _data = d.pop("data")
        for data_item_data in _data:
            data_item = VolumeBucket.from_dict(data_item_data)

            data.append(data_item)

        volumes = cls(
            window=window,
            bucket=bucket,
            from_=from_,
            to=to,
            data=data,
        )

        volumes.additional_properties = d
        return volumes

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
