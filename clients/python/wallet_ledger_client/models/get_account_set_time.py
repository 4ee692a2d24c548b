from enum import StrEnum


class GetAccountSetTime(StrEnum):
    EFFECTIVE = "effective"
    LEDGER = "ledger"

    def __str__(self) -> str:
        return str(self.value)
