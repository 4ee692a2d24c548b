from enum import StrEnum


class AccountViewType(StrEnum):
    SYSTEM = "system"
    WALLET = "wallet"

    def __str__(self) -> str:
        return str(self.value)
