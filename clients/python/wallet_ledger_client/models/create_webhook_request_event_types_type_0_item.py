from enum import StrEnum


class CreateWebhookRequestEventTypesType0Item(StrEnum):
    ACCOUNT_CLOSED = "account.closed"
    ACCOUNT_FROZEN = "account.frozen"
    ACCOUNT_NEGATIVE_BALANCE = "account.negative_balance"
    BALANCE_MONITOR_TRIGGERED = "balance.monitor_triggered"
    HOLD_CREATED = "hold.created"
    LEDGER_CHECKPOINT = "ledger.checkpoint"
    TRANSACTION_EXPIRED = "transaction.expired"
    TRANSACTION_METADATA_ERASED = "transaction.metadata_erased"
    TRANSACTION_POSTED = "transaction.posted"
    TRANSACTION_REJECTED = "transaction.rejected"
    TRANSACTION_REVERSED = "transaction.reversed"
    TRANSACTION_VOIDED = "transaction.voided"

    def __str__(self) -> str:
        return str(self.value)
