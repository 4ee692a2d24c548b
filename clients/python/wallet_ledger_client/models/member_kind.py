from enum import StrEnum


class MemberKind(StrEnum):
    ACCOUNT = "account"
    SET = "set"

    def __str__(self) -> str:
        return str(self.value)
