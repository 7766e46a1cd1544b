"""CLI errors: each carries the exit code and a message that names the object and what to do."""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    NOT_FOUND = 3
    FORBIDDEN = 4
    TIMEOUT = 5
    CONFLICT = 6


class CliError(Exception):
    def __init__(self, message: str, *, code: Exit = Exit.FAILED) -> None:
        super().__init__(message)
        self.code = code
