from enum import StrEnum


class ListAccountsType(StrEnum):
    SYSTEM = "system"
    WALLET = "wallet"

    def __str__(self) -> str:
        return str(self.value)
