from enum import StrEnum


class Ready(StrEnum):
    READY = "ready"

    def __str__(self) -> str:
        return str(self.value)
