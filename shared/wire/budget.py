"""Byte budgets: what the frames a connection (and a server) has open may cost at once.

A frame takes its worst-case cost (Limits.frame_cost) from its connection's budget and
then from its server's before its body is read, and gives it back once its reply is
sent. Waiters are served first come, first served, so a small request queued behind a
large one is not starved by later large ones.
"""

from __future__ import annotations

import asyncio
from collections import deque


class Budget:
    """``capacity`` bytes shared by whoever takes from it."""

    def __init__(self, capacity: int, *, name: str) -> None:
        self.capacity = capacity
        self.name = name  # the limit an error reply names when a frame waits too long
        self._used = 0
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def used(self) -> int:
        return self._used

    def try_take(self, amount: int) -> bool:
        """Hold ``amount`` bytes if they are free now and nobody queues before us."""
        if not self._waiters and self._used + amount <= self.capacity:
            self._used += amount
            return True
        return False

    async def take(self, amount: int) -> None:
        """Wait until ``amount`` bytes are free and hold them; amount <= capacity."""
        if amount > self.capacity:
            raise ValueError(f"{self.name}: {amount} bytes exceed the capacity {self.capacity}")
        if self.try_take(amount):
            return
        entry = (amount, asyncio.get_running_loop().create_future())
        self._waiters.append(entry)
        try:
            await entry[1]
        except BaseException:
            if entry[1].done() and not entry[1].cancelled():
                self.give(amount)  # granted just as we were cancelled
            else:
                if entry in self._waiters:  # _grant drops cancelled waiters it meets
                    self._waiters.remove(entry)
                self._grant()  # we may have been the head others queued behind
            raise

    def give(self, amount: int) -> None:
        self._used -= amount
        if self._waiters:
            self._grant()

    def _grant(self) -> None:
        while self._waiters and self._used + self._waiters[0][0] <= self.capacity:
            amount, future = self._waiters.popleft()
            if not future.done():
                self._used += amount
                future.set_result(None)


class Lease:
    """Bytes held in a chain of budgets (a connection's, then its server's) until released."""

    __slots__ = ("_budgets", "_held", "amount", "waiting_on")

    def __init__(self, *budgets: Budget) -> None:
        self._budgets = budgets
        self._held = 0  # the first _held budgets of the chain hold ``amount``
        self.amount = 0
        self.waiting_on: Budget | None = None  # the budget ``take`` waits for, if any

    def try_take(self, amount: int) -> bool:
        """Take ``amount`` from every budget of the chain if all have it free now."""
        self.amount = amount
        for budget in self._budgets:
            if not budget.try_take(amount):
                self.release()
                return False
            self._held += 1
        return True

    async def take(self, amount: int) -> None:
        """Take ``amount`` from every budget of the chain, in order; all or nothing."""
        self.amount = amount
        try:
            for budget in self._budgets:
                self.waiting_on = budget
                await budget.take(amount)
                self._held += 1
            self.waiting_on = None
        except BaseException:
            self.release()
            raise

    def shrink(self, amount: int) -> None:
        """Hold only ``amount`` from now on (a frame turned out cheaper than its worst case)."""
        if amount < self.amount:
            self._give(self.amount - amount)
            self.amount = amount

    def release(self) -> None:
        self._give(self.amount)
        self._held = 0
        self.amount = 0

    def _give(self, amount: int) -> None:
        for i in range(self._held):
            self._budgets[i].give(amount)
