"""virt-api's errors: one base class."""

from __future__ import annotations


class VirtApiError(Exception):
    """Base class of every error raised by the virt_api package."""


class ConfigError(VirtApiError):
    """The environment does not describe a usable virt-api (admission or subresources)."""
