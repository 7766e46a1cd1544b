"""The suite's last check on real nodes (issue 35): no daemon logged a work item that failed
with a traceback.

At the end of the session, before the stack is torn down, every virt-controller and
virt-handler container's log (the current instance and, where it restarted, the previous
one) is read through `kubectl logs`, and each JSON line whose event is a work item's
unexpected failure and which carries a traceback is reported. A fault a test injects on
purpose (a module marked `faults`: etcd, a kubelet or a daemon killed) may: a failure logged
while such a test ran, or within `FAULT_GRACE` seconds after it, is listed as excused and
does not fail the run. Everywhere else the daemons turn what they expect (a dead launcher,
a refused connection, a conflict) into typed sync errors and conditions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from localkube.deploy import Kubectl

# What a loop logs when a work item fails with an exception it did not expect.
FAILURE_EVENTS = frozenset({"work_item_failed", "sync_unexpected_error"})
DAEMONS = ("kubevirt.io=virt-handler", "kubevirt.io=virt-controller")
FAULT_GRACE = 30.0
# (start, end) in seconds since the epoch: while a test that injects faults ran, plus grace.
Window = tuple[float, float]


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    pod: str
    event: str
    key: str
    exception: str
    at: float | None = None  # the line's timestamp, seconds since the epoch

    def within(self, windows: list[Window]) -> bool:
        """True when logged inside one of `windows`."""
        return self.at is not None and any(a <= self.at <= b for a, b in windows)

    def __str__(self) -> str:
        last = self.exception.strip().splitlines()[-1] if self.exception.strip() else "?"
        return f"{self.pod}: {self.event} key={self.key}: {last}"


def failures_in(text: str, *, pod: str) -> Iterator[Failure]:
    """Each failed work item with a traceback in one container's log."""
    for line in text.splitlines():
        if not line.startswith("{") or "Traceback" not in line:
            continue
        try:
            entry: dict[str, Any] = json.loads(line)
        except ValueError:
            continue
        if entry.get("event") in FAILURE_EVENTS and "Traceback" in str(entry.get("exception")):
            yield Failure(
                pod=pod,
                event=str(entry["event"]),
                key=str(entry.get("key", "")),
                exception=str(entry["exception"]),
                at=_epoch(entry.get("timestamp")),
            )


def _epoch(stamp: object) -> float | None:
    """structlog's ISO timestamp (UTC, `Z`) in seconds since the epoch; None if absent."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def daemon_failures(kubectl: Kubectl, *, namespace: str = "kubevirt") -> list[Failure]:
    """Every failed work item with a traceback in the daemons' logs."""
    found: list[Failure] = []
    for selector in DAEMONS:
        listed = json.loads(kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json"))
        for pod in listed["items"]:
            name = pod["metadata"]["name"]
            for previous in ("--previous=false", "--previous=true"):
                text = kubectl("logs", "-n", namespace, name, "--all-containers", previous,
                               check=False)  # fmt: skip
                found.extend(failures_in(text, pod=name))
    return found
