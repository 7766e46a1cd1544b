"""The one daemon skeleton every kubevirt-py process shares.

    def main() -> None:
        config = parse_or_exit("virt-x-py", Config.from_args, ConfigError)
        run_daemon("virt-x-py", run(config), exit_codes={ConfigError: 2, Died: 3})

    async def run(config) -> None:
        async with stop_on_signals() as stop:      # SIGTERM/SIGINT set `stop`
            ...build objects, one TaskGroup; a task awaits `raise_on(stop)`,
            which raises Shutdown; `except* Shutdown` ends the group in order...

One `Shutdown` for every daemon; start-up errors become an exit code and one line on stderr
(exit 2: bad configuration, as a CLI would) instead of a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Any, NoReturn, TypeVar

import uvloop

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
CONFIG_EXIT = 2

T = TypeVar("T")


class Shutdown(Exception):
    """Raised inside a daemon's TaskGroup when it is asked to stop; `except*` filters it."""


@contextlib.asynccontextmanager
async def stop_on_signals(
    stop: asyncio.Event | None = None,
    signals: tuple[signal.Signals, ...] = STOP_SIGNALS,
    *,
    ignore_after: bool = False,
) -> AsyncIterator[asyncio.Event]:
    """An event the termination signals set while the block runs (handlers removed after).

    `ignore_after`: once the block is left the process is ending, so a stop signal that
    arrives then (a kubelet's SIGTERM racing a launcher that already stops on its handler's
    Delete) is ignored instead of killing it mid-exit with 128+15: its exit code stays its
    own."""
    event = stop if stop is not None else asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in signals:
        loop.add_signal_handler(sig, event.set)
    try:
        yield event
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
            if ignore_after:
                signal.signal(sig, signal.SIG_IGN)


async def raise_on(stop: asyncio.Event) -> NoReturn:
    """Wait for `stop`, then raise Shutdown: the task that ends a daemon's TaskGroup."""
    await stop.wait()
    raise Shutdown


def first_leaf(error: BaseException) -> BaseException:
    """The first non-group exception inside (possibly nested) exception groups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def exit_code_for(error: BaseException, exit_codes: Mapping[type[BaseException], int]) -> int:
    """The code of the first class in `exit_codes` that `error` is an instance of."""
    for kind, code in exit_codes.items():
        if isinstance(error, kind):
            return code
    raise error


def parse_or_exit(name: str, parse: Callable[[], T], *errors: type[Exception]) -> T:
    """`parse()`'s config; a refusal prints one line and exits with CONFIG_EXIT."""
    try:
        return parse()
    except errors as e:
        print(f"{name}: {e}", file=sys.stderr)
        sys.exit(CONFIG_EXIT)


def run_daemon(
    name: str,
    main: Coroutine[Any, Any, None],
    *,
    exit_codes: Mapping[type[BaseException], int],
) -> None:
    """Run `main` on uvloop; an error of a kind in `exit_codes` exits with its code and one
    line on stderr. Anything else propagates (a traceback: a bug)."""
    kinds = tuple(exit_codes)
    try:
        uvloop.run(main)
    except* kinds as group:
        error = first_leaf(group)
        print(f"{name}: {error}", file=sys.stderr)
        sys.exit(exit_code_for(error, exit_codes))
