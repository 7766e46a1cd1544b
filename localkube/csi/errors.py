"""The driver's typed errors; each carries the gRPC status code the CSI spec asks for."""

from __future__ import annotations

from enum import StrEnum


class Code(StrEnum):
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    OUT_OF_RANGE = "OUT_OF_RANGE"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    UNIMPLEMENTED = "UNIMPLEMENTED"
    INTERNAL = "INTERNAL"


class CsiError(Exception):
    """A refused or failed CSI call: `code` is the gRPC status, the message says why."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
