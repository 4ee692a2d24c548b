from enum import StrEnum


class SettleOutcome(StrEnum):
    ALREADY_DROPPED = "already_dropped"
    ALREADY_REPLAYED = "already_replayed"
    DROPPED = "dropped"
    REPLAYED = "replayed"

    def __str__(self) -> str:
        return str(self.value)
