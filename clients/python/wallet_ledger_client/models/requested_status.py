from enum import StrEnum


class RequestedStatus(StrEnum):
    PENDING = "pending"
    POSTED = "posted"

    def __str__(self) -> str:
        return str(self.value)
