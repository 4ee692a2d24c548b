from enum import StrEnum


class MonitorField(StrEnum):
    AVAILABLE = "available"
    PENDING_OUT = "pending_out"
    POSTED = "posted"

    def __str__(self) -> str:
        return str(self.value)
