"""Clean stops for the tooling: SIGTERM, SIGINT and SIGHUP tear down what it started.

Python's default ends a process at SIGTERM or SIGHUP without running a single `finally`,
so a benchmark stopped by `timeout`, CI or a closed terminal would leave its private
cluster running. `StopSignals` turns the first of these signals into `Interrupted` (a
KeyboardInterrupt, so pytest and asyncio unwind as after Ctrl-C and every `finally` and
fixture teardown runs). A signal that arrives once the teardown is under way (a second
signal, or any signal during a teardown that began by itself) does not interrupt it: it
forces it, running the registered force callbacks (SIGKILL every process of the cluster)
so the teardown that follows only has to unmount and delete.

Signal handlers are process-wide, so the one `StopSignals` of a process is module state
(`stop_signals()`); entry points `install()` it, `session_cluster` registers its force.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

import structlog

log = structlog.get_logger()

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
Handler = Callable[[int, FrameType | None], object] | int | None


class Interrupted(KeyboardInterrupt):
    """The process was asked to stop by a signal: unwind, tearing down on the way."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


class StopSignals:
    """First stop signal: `Interrupted`; any later one, or one during a teardown: force."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self._forces: dict[int, Callable[[], None]] = {}
        self._teardowns = 0
        self._previous: dict[int, Handler] = {}

    @property
    def installed(self) -> bool:
        return bool(self._previous)

    def install(self) -> None:
        """Take over the stop signals (main thread only; a no-op elsewhere or twice)."""
        if self.installed or threading.current_thread() is not threading.main_thread():
            return
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._on_signal)

    def uninstall(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    @contextlib.contextmanager
    def on_force(self, force: Callable[[], None]) -> Iterator[None]:
        """While inside: `force` runs when a stop is forced."""
        key = id(force)
        self._forces[key] = force
        try:
            yield
        finally:
            self._forces.pop(key, None)

    @contextlib.contextmanager
    def tearing_down(self) -> Iterator[None]:
        """While inside, a stop signal forces instead of interrupting the teardown."""
        self._teardowns += 1
        try:
            yield
        finally:
            self._teardowns -= 1

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        name = signal.Signals(signum).name
        if len(self.received) == 1 and not self._teardowns:
            log.warning("stop_signal_tearing_down", signal=name)
            raise Interrupted(signum)
        log.warning("stop_signal_forcing", signal=name, forces=len(self._forces))
        self.force()

    def force(self) -> None:
        for force in list(self._forces.values()):
            try:
                force()
            except Exception:  # a signal handler: one failing force must not stop the others
                log.exception("stop_force_failed")


_SIGNALS = StopSignals()


def stop_signals() -> StopSignals:
    """This process's StopSignals (signal handlers are per process)."""
    return _SIGNALS
