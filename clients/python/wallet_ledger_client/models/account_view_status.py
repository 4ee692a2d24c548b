from enum import StrEnum


class AccountViewStatus(StrEnum):
    ACTIVE = "active"
    CLOSED = "closed"
    FROZEN = "frozen"

    def __str__(self) -> str:
        return str(self.value)
