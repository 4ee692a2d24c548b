from enum import StrEnum


class MonitorState(StrEnum):
    ARMED = "armed"
    TRIGGERED = "triggered"

    def __str__(self) -> str:
        return str(self.value)
