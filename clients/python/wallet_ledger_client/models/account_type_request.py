from enum import StrEnum


class AccountTypeRequest(StrEnum):
    SYSTEM = "system"
    WALLET = "wallet"

    def __str__(self) -> str:
        return str(self.value)
