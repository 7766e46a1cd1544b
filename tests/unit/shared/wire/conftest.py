"""The wire tests run on both loops: uvloop, as every daemon runs, and asyncio's own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest
import uvloop


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    if item.path.name == "test_launcher_fuzz.py":  # its server is a child on uvloop anyway
        return {"uvloop": uvloop.new_event_loop}
    return {"uvloop": uvloop.new_event_loop, "asyncio": asyncio.new_event_loop}
