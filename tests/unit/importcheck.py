"""Which modules a snippet of Python loads: run in a fresh interpreter, so nothing this test
process already imported counts."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence


def loaded_by(
    code: str, modules: Sequence[str], *, env: Mapping[str, str] | None = None
) -> tuple[list[str], str]:
    """Run `code` in a new interpreter; the `modules` it left in sys.modules, and its
    stdout + stderr (for a failing assertion's message)."""
    probe = (
        f"{code}\nimport json, sys\n"
        f"print('LOADED', json.dumps([m for m in {list(modules)!r} if m in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(env) if env is not None else None,
    )
    output = done.stdout + done.stderr
    for line in done.stdout.splitlines():
        if line.startswith("LOADED "):
            return list(json.loads(line.removeprefix("LOADED "))), output
    raise AssertionError(f"the snippet did not finish: {output}")
