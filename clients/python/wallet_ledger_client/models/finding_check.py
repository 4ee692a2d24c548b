from enum import StrEnum


class FindingCheck(StrEnum):
    BALANCE_RANGE = "balance_range"
    CHAIN_LINK = "chain_link"
    CHECKPOINT_MISMATCH = "checkpoint_mismatch"
    CHECKPOINT_SEAL = "checkpoint_seal"
    ENTRY_MISMATCH = "entry_mismatch"
    OVERDUE_HOLD = "overdue_hold"
    OVER_REVERSED = "over_reversed"
    POSTING_MISMATCH = "posting_mismatch"
    SEALED_HEAD = "sealed_head"
    SEALED_TRANSACTION = "sealed_transaction"
    SET_TOTALS = "set_totals"
    STALE_OPEN_HOLD = "stale_open_hold"
    TRIAL_BALANCE = "trial_balance"
    UNBALANCED_TRANSACTION = "unbalanced_transaction"
    WALLET_CHAIN = "wallet_chain"

    def __str__(self) -> str:
        return str(self.value)
