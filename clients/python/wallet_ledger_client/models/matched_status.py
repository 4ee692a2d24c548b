from enum import StrEnum


class MatchedStatus(StrEnum):
    FAILED = "failed"
    REFUNDED = "refunded"
    SETTLED = "settled"

    def __str__(self) -> str:
        return str(self.value)
