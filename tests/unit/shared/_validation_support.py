"""Helpers shared by the validation tests: fixtures, path edits and error lookup."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml

from shared.model import FieldError, VirtualMachineInstance
from shared.model.validation import validate_vmi

DATA = Path(__file__).parent / "data"
DELETE = object()
_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
KI = 1024
MI = 1024**2
DISKS = "spec.domain.devices.disks"
VOLS = "spec.volumes"
IFACES = "spec.domain.devices.interfaces"
CI = "spec.volumes[1].cloudInitNoCloud"
KB = "spec.domain.firmware.kernelBoot"


def load(name: str) -> dict[str, Any]:
    """A fixture manifest as a wire dict."""
    data = yaml.safe_load((DATA / name).read_text())
    assert isinstance(data, dict)
    return data


def edit(d: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """A copy of `d` with each path (`a.b[1].c`) set (appended one past a list's end)
    or deleted for DELETE."""
    out = copy.deepcopy(d)
    for path, value in changes.items():
        steps: list[str | int] = [
            m[1] if m[1] is not None else int(m[2]) for m in _STEP.finditer(path)
        ]
        node: Any = out
        for step in steps[:-1]:
            if isinstance(step, str) and step not in node:
                node[step] = {}
            node = node[step]
        last = steps[-1]
        if value is DELETE:
            del node[last]
        elif isinstance(node, list) and last == len(node):
            node.append(value)
        else:
            node[last] = value
    return out


def vmi_errors(changes: dict[str, Any], **kwargs: Any) -> list[FieldError]:
    """Validation errors of the running-VMI fixture after `changes`."""
    vmi = VirtualMachineInstance.from_dict(edit(load("vmi-running.yaml"), changes))
    return validate_vmi(vmi, **kwargs)


def messages_at(errors: list[FieldError], path: str) -> list[str]:
    """The messages reported at exactly `path`."""
    return [e.message for e in errors if e.path == path]
