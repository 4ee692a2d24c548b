from enum import StrEnum


class ListDeliveriesStatus(StrEnum):
    CANCELLED = "cancelled"
    DEAD = "dead"
    DELIVERED = "delivered"
    PENDING = "pending"

    def __str__(self) -> str:
        return str(self.value)
