from enum import StrEnum


class StatusFilter(StrEnum):
    EXPIRED = "expired"
    PENDING = "pending"
    POSTED = "posted"
    REJECTED = "rejected"
    VOIDED = "voided"

    def __str__(self) -> str:
        return str(self.value)
