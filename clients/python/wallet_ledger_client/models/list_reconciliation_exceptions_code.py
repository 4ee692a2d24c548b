from enum import StrEnum


class ListReconciliationExceptionsCode(StrEnum):
    AMOUNT_MISMATCH = "amount_mismatch"
    CURRENCY_MISMATCH = "currency_mismatch"
    DUPLICATE_IN_FILE = "duplicate_in_file"
    MISSING_AT_PROVIDER = "missing_at_provider"
    MISSING_IN_LEDGER = "missing_in_ledger"
    STATUS_MISMATCH = "status_mismatch"
    UNPARSABLE_ROW = "unparsable_row"

    def __str__(self) -> str:
        return str(self.value)
