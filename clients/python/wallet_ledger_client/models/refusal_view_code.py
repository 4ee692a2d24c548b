from enum import StrEnum


class RefusalViewCode(StrEnum):
    ACCOUNT_CLOSED = "account_closed"
    ACCOUNT_FROZEN = "account_frozen"
    INSUFFICIENT_FUNDS = "insufficient_funds"
    REVERSAL_EXCEEDS_ORIGINAL = "reversal_exceeds_original"
    VELOCITY_LIMIT_EXCEEDED = "velocity_limit_exceeded"

    def __str__(self) -> str:
        return str(self.value)
