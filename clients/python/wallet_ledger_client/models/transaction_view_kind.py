from enum import StrEnum


class TransactionViewKind(StrEnum):
    EXCHANGE = "exchange"
    PAYMENT = "payment"
    REVERSAL = "reversal"
    TRANSACTION = "transaction"
    TRANSFER = "transfer"

    def __str__(self) -> str:
        return str(self.value)
