from enum import StrEnum


class Bucket(StrEnum):
    HOUR = "hour"
    MINUTE = "minute"

    def __str__(self) -> str:
        return str(self.value)
