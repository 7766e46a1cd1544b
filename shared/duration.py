"""Go durations (metav1.Duration on the wire: "5m0s", "1h", "90s", "0"), parsed where they
arrive: a freeze's unfreezeTimeout (virt-api) and a snapshot's failureDeadline (controller,
admission)."""

from __future__ import annotations

import re

_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration(text: str) -> float:
    """Seconds of a Go duration string ("5m0s", "1h", "90s", "0"); ValueError otherwise."""
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(text):
        m = _DURATION.match(text, pos)
        if m is None:
            raise ValueError(f"invalid duration {text!r}")
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if pos == 0:
        raise ValueError("empty duration")
    return total


def format_duration(seconds: float) -> str:
    """A Go duration string of whole seconds ("300s")."""
    return f"{max(0, int(seconds))}s"
