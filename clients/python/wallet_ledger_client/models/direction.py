from enum import StrEnum


class Direction(StrEnum):
    BOTH = "both"
    CREDIT = "credit"
    DEBIT = "debit"

    def __str__(self) -> str:
        return str(self.value)
