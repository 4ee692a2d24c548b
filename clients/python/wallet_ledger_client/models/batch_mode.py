from enum import StrEnum


class BatchMode(StrEnum):
    ATOMIC = "atomic"
    INDEPENDENT = "independent"

    def __str__(self) -> str:
        return str(self.value)
