from enum import StrEnum


class TransactionViewStatus(StrEnum):
    EXPIRED = "expired"
    PENDING = "pending"
    POSTED = "posted"
    REJECTED = "rejected"
    VOIDED = "voided"

    def __str__(self) -> str:
        return str(self.value)
