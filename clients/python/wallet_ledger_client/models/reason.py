from enum import StrEnum


class Reason(StrEnum):
    ACCOUNT_CLOSED = "account_closed"
    CONFLICTING_STATE = "conflicting_state"
    CORRUPT_ROW = "corrupt_row"
    IDEMPOTENCY_MISMATCH = "idempotency_mismatch"
    MALFORMED_EVENT = "malformed_event"
    TIMED_OUT = "timed_out"
    UNKNOWN_ACCOUNT = "unknown_account"
    UNKNOWN_PAYMENT = "unknown_payment"

    def __str__(self) -> str:
        return str(self.value)
