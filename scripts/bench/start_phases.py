"""Where create -> Running goes, phase by phase, from the daemons' own log lines.

The launcher and the handler log JSON with microsecond timestamps (structlog); the
kubelet keeps each pod's log on its node. Per VMI, the first time each mark was logged:

  created     the benchmark sent the create (its own clock)
  process     the launcher's process started (the kernel's record, logged by the launcher)
  first_log   the launcher's first line: interpreter and the start path's imports done
  spawned     libvirtd's process started (before the rest of the launcher is imported)
  ready       the launcher's command socket answers and is renamed (launcher-sock), before
              the rest of the launcher is imported
  noticed     the handler connected to it
  wired       the handler wired the pod's network (its Sync follows, and waits for commands)
  imported    the rest of the launcher imported (launcher.serve)
  libvirtd    libvirtd accepts connections
  commands    the launcher's commands registered (a waiting Sync is served from here)
  defined     libvirt defined the domain (the launcher saw the event)
  started     the domain runs (the launcher's Sync is done)
  written     the handler wrote phase Running
  seen        the benchmark's watch saw Running

and for a pause (b): the request sent, the launcher saw libvirt's Suspended event, the
handler wrote the Paused condition, the watch saw it. Marks an older build does not log
are left out.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pod_timeline import epoch

START_MARKS = (
    "created", "process", "first_log", "spawned", "ready", "noticed", "wired", "imported",
    "libvirtd", "commands", "defined", "started", "written", "seen",
)  # fmt: skip
PAUSE_MARKS = ("requested", "suspended", "written", "seen")
Marks = dict[str, dict[str, float]]  # VMI name -> mark -> epoch seconds


def log_lines(files: Iterable[Path]) -> Iterator[dict[str, Any]]:
    """The JSON objects of CRI log files (`<time> <stream> <F|P> <line>`)."""
    for path in files:
        for line in path.read_text(errors="replace").splitlines():
            parts = line.split(" ", 3)
            if len(parts) == 4 and parts[3].startswith("{"):
                try:
                    yield json.loads(parts[3])
                except ValueError:
                    continue


def _mark_of(entry: Mapping[str, Any]) -> tuple[str, float] | None:
    """The start mark a log line is, and its time (epoch seconds)."""
    event, at = entry.get("event"), epoch(entry["timestamp"])
    simple = {
        "libvirtd_spawned": "spawned", "launcher_imported": "imported",
        "libvirtd_started": "libvirtd", "launcher_ready": "ready",
        "pod_network_wired": "wired", "domain_started": "started",
        "launcher_commands_registered": "commands",
    }  # fmt: skip
    if event in simple:
        return simple[event], at
    if event == "launcher_process":
        return "first_log", at
    if event == "launcher_state" and entry.get("state") == "Connected":
        return "noticed", at
    if event == "domain_event_seen" and entry.get("libvirt_event") == "Defined":
        return "defined", at
    if event == "vmi_status_written" and entry.get("phase") == "Running":
        return "written", at
    return None


def start_marks(files: Iterable[Path]) -> Marks:
    """Each VMI's first time of each start mark found in the launchers' and handlers' logs."""
    marks: Marks = {}
    for entry in log_lines(files):
        key, ts = entry.get("vmi"), entry.get("timestamp")
        if not isinstance(key, str) or not isinstance(ts, str):
            continue
        found = _mark_of(entry)
        name = key.rpartition("/")[2]
        if found is not None:
            marks.setdefault(name, {}).setdefault(*found)
        if entry.get("event") == "launcher_process" and entry.get("started_at"):
            marks.setdefault(name, {}).setdefault("process", float(entry["started_at"]))
    return marks


def pause_marks(files: Iterable[Path], requested: Mapping[str, tuple[float, float]]) -> Marks:
    """Each paused VMI's marks: `requested` holds (sent, seen by the watch) per name."""
    marks: Marks = {n: {"requested": s, "seen": w} for n, (s, w) in requested.items()}
    for entry in log_lines(files):
        name = str(entry.get("vmi", "")).rpartition("/")[2]
        if name not in marks or "timestamp" not in entry:
            continue
        at, sent = epoch(entry["timestamp"]), marks[name]["requested"]
        if at < sent:
            continue
        event = entry.get("event")
        if event == "domain_event_seen" and entry.get("libvirt_event") == "Suspended":
            marks[name].setdefault("suspended", at)
        if event == "vmi_status_written" and entry.get("paused") is True:
            marks[name].setdefault("written", at)
    return marks


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def print_phases(title: str, marks: Marks, order: tuple[str, ...]) -> None:
    """Each mark's median / P95 after the first, and each step's from the mark before it
    (over the VMIs that logged both)."""
    print(f"    {title} ({len(marks)} VMIs; median / P95, ms)")
    print(f"      {'mark':11s} {'since ' + order[0]:>19s} {'step from the mark before':>30s}")
    before = order[0]
    for mark in order[1:]:
        since = [m[mark] - m[order[0]] for m in marks.values() if mark in m and order[0] in m]
        if not since:
            continue
        steps = [m[mark] - m[before] for m in marks.values() if mark in m and before in m]
        print(
            f"      {mark:11s} {statistics.median(since) * 1e3:8.0f} / {_pct(since, 0.95) * 1e3:6.0f}"
            f"   {before:>11s} -> {statistics.median(steps) * 1e3:6.0f} / "
            f"{_pct(steps, 0.95) * 1e3:6.0f}"
        )
        before = mark


def print_event_to_status(marks: Marks) -> None:
    """Issue 39's (b) proper: from the launcher's domain event (its log line) until the
    bench's watch saw the status, without the pause request before it."""
    spans = [m["seen"] - m["suspended"] for m in marks.values() if "seen" in m and "suspended" in m]
    if not spans:
        print("    domain event -> VMI status seen: no samples with both marks")
        return
    p50, p95 = statistics.median(spans) * 1e3, _pct(spans, 0.95) * 1e3
    verdict = "ok" if p95 <= 200 else "MISSED"
    print(
        f"    domain event (launcher's Suspended) -> VMI status seen: P50 {p50:.0f} ms  "
        f"P95 {p95:.0f} ms  ({len(spans)} samples; target P95 <= 200 ms): {verdict}"
    )
