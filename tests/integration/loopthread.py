"""An asyncio program on a daemon thread, for integration tests that serve something real
(the subresource stack, the admission webhooks) while the test body calls kubectl.

``start()`` returns once the program calls ``ready()``, raising what it failed with if it
ended first; ``stop()`` sets the stop event its ``serve()`` was given and joins it."""

from __future__ import annotations

import asyncio
import threading


class LoopThread:
    """Subclasses implement ``serve(stop)`` and call ``ready()`` once they serve."""

    def __init__(self, *, what: str) -> None:
        self._what = what
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, name=what, daemon=True)

    def start(self, *, timeout: float) -> None:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError(f"the {self._what} did not come up in {timeout}s")
        if self._error is not None:
            raise RuntimeError(f"the {self._what} failed: {self._error!r}") from self._error

    def stop(self, *, timeout: float) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)

    def ready(self) -> None:
        self._ready.set()

    async def serve(self, stop: asyncio.Event) -> None:
        raise NotImplementedError

    def _main(self) -> None:
        try:
            asyncio.run(self._enter())
        except BaseException as e:  # reported to start(); the thread ends here
            self._error = e
        finally:
            self._ready.set()

    async def _enter(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        await self.serve(self._stop)
