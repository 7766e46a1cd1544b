"""Where create -> Running goes on real nodes, from the launcher pods' own timestamps.

Kubernetes stamps objects in whole seconds (creationTimestamp, conditions, container
start/finish; only the VMI's Running is this benchmark's own watch time), so each stage is a
median over the VMIs with about a second of resolution:
enough to see whether the kubelet's pod start, the init containers or the launcher's own
start dominate.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from datetime import datetime
from typing import Any

STAGES = (
    ("VMI created -> launcher pod created (controller)", "vmi", "pod"),
    ("pod created -> scheduled", "pod", "scheduled"),
    ("scheduled -> first init container started (sandbox, CNI)", "scheduled", "init_start"),
    ("init containers (containerDisk, kernel copies)", "init_start", "init_end"),
    ("last init container done -> launcher container started", "init_end", "compute"),
    # Image volumes (the default delivery): no init container, the images are mounted.
    (
        "scheduled -> launcher container started (sandbox, CNI, image volumes)",
        "scheduled",
        "direct",
    ),
    ("launcher container started -> VMI Running (launcher, libvirtd, QEMU)", "compute", "running"),
)


def epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _ts(text: str | None) -> float | None:
    return epoch(text) if text else None


def pod_marks(pod: Mapping[str, Any]) -> dict[str, float]:
    """The pod's own stage times (epoch seconds) that it has."""
    status = pod.get("status") or {}
    marks: dict[str, float | None] = {"pod": _ts(pod["metadata"].get("creationTimestamp"))}
    for cond in status.get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "True":
            marks["scheduled"] = _ts(cond.get("lastTransitionTime"))
    inits = [
        (s.get("state") or {}).get("terminated") or {}
        for s in status.get("initContainerStatuses") or ()
    ]
    starts = [t for s in inits if (t := _ts(s.get("startedAt"))) is not None]
    ends = [t for s in inits if (t := _ts(s.get("finishedAt"))) is not None]
    marks["init_start"] = min(starts, default=None)
    marks["init_end"] = max(ends, default=None)
    for c in status.get("containerStatuses") or ():
        if c.get("name") == "compute":
            marks["compute"] = _ts(((c.get("state") or {}).get("running") or {}).get("startedAt"))
    if not inits:
        marks["direct"] = marks.get("compute")
    return {k: v for k, v in marks.items() if v is not None}


def print_timeline(
    pods: Mapping[str, Mapping[str, Any]],
    pod_of: Mapping[str, str],
    vmi_times: Mapping[str, tuple[float, float]],
) -> None:
    """pods: pod UID -> pod; pod_of: VMI name -> launcher pod UID; vmi_times: VMI name ->
    (its creationTimestamp, when the watch saw it Running) in epoch seconds."""
    spans: dict[str, list[float]] = {label: [] for label, _, _ in STAGES}
    for name, (created, running) in vmi_times.items():
        pod = pods.get(pod_of.get(name, ""))
        if pod is None:
            continue
        marks = {**pod_marks(pod), "vmi": created, "running": running}
        for label, start, end in STAGES:
            if start in marks and end in marks:
                spans[label].append(marks[end] - marks[start])
    print("    where create -> Running goes (medians; pod timestamps are whole seconds):")
    for label, values in spans.items():
        if values:
            print(f"      {label:76s} {statistics.median(values):5.1f} s")
