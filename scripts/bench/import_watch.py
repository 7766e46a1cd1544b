"""Where an import's time goes: watches (kubectl get -w) on the DataVolume and its importer
pod, each event stamped on arrival with the node's uptime clock (CLOCK_BOOTTIME, what
/proc/uptime shows inside the importer pod on the same host), and the importer's own step
marks (its termination message: `importer steps (uptime s): start=… fetched=… done=…`).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STEPS_PREFIX = "importer steps (uptime s):"


def uptime() -> float:
    """The clock the importer's marks use."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def parse_objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects kubectl -w -o json printed one after another."""
    decoder, at = json.JSONDecoder(), 0
    objects: list[dict[str, Any]] = []
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return objects
        obj, at = decoder.raw_decode(text, at)
        objects.append(obj)


def parse_steps(message: str) -> dict[str, float]:
    """`start=12.34 fetched=13.01 …` after STEPS_PREFIX; {} for any other message."""
    if not message.startswith(STEPS_PREFIX):
        return {}
    pairs = (item.split("=", 1) for item in message[len(STEPS_PREFIX) :].split())
    return {name: float(value) for name, value in pairs}


@dataclass
class Watch:
    """`kubectl get <kind> -w -o json` on one name; each object with its arrival time."""

    kubectl: Path
    kubeconfig: Path
    namespace: str
    kind: str
    name: str
    seen: list[tuple[float, dict[str, Any]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        argv = [str(self.kubectl), "--kubeconfig", str(self.kubeconfig), "get", self.kind,
                "-n", self.namespace, "--field-selector", f"metadata.name={self.name}",
                "-w", "-o", "json"]  # fmt: skip
        self._proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        chunk: list[str] = []
        for line in self._proc.stdout:
            chunk.append(line)
            if line.rstrip("\n") == "}":  # an object's last line (kubectl pretty-prints)
                at = uptime()
                self.seen.extend((at, obj) for obj in parse_objects("".join(chunk)))
                chunk = []

    def first(self, path: tuple[str, ...], value: str) -> float | None:
        """When an object with `value` at `path` first arrived."""
        for at, obj in list(self.seen):
            if _dig(obj, path) == value:
                return at
        return None

    def stop(self) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=10)
        self._thread.join(timeout=10)


def _dig(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def importer_steps(pod: Watch) -> dict[str, float]:
    """The importer's marks from the last termination message the pod watch saw."""
    for _, obj in reversed(list(pod.seen)):
        for status in _dig(obj, ("status", "containerStatuses")) or ():
            message = _dig(status, ("state", "terminated", "message")) or ""
            steps = parse_steps(str(message).strip())
            if steps:
                return steps
    return {}


def breakdown(*, created: float, dv: Watch, pod: Watch) -> list[tuple[str, float]]:
    """(step, seconds) from the create to the DataVolume's Succeeded, in order."""
    marks: list[tuple[str, float | None]] = [("create", created)]
    marks += [(f"DataVolume {p}", dv.first(("status", "phase"), p))
              for p in ("ImportScheduled",)]  # fmt: skip
    marks.append(("pod Running (watch)", pod.first(("status", "phase"), "Running")))
    marks += [(f"importer {k}", v) for k, v in importer_steps(pod).items()]
    marks.append(("pod Succeeded (watch)", pod.first(("status", "phase"), "Succeeded")))
    marks.append(("DataVolume Succeeded", dv.first(("status", "phase"), "Succeeded")))
    known = sorted(((name, at) for name, at in marks if at is not None), key=lambda m: m[1])
    return [(name, at - created) for name, at in known]
