from enum import StrEnum


class Alive(StrEnum):
    OK = "ok"

    def __str__(self) -> str:
        return str(self.value)
