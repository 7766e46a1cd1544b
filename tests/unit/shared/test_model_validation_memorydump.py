"""Validation of memoryDump volumes (KubeVirt's memory dumps): named after their claim,
hotpluggable, writable, no disk's, one at most."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.shared._validation_support import VOLS, messages_at, vmi_errors

_DUMP = {"name": "dump", "memoryDump": {"claimName": "dump", "hotpluggable": True}}


@pytest.mark.parametrize(
    ("volume", "path", "fragment"),
    [
        pytest.param({**_DUMP, "name": "other"}, f"{VOLS}[4].name", "named after its claim",
                     id="named-otherwise"),
        pytest.param({**_DUMP, "memoryDump": {"claimName": "dump"}},
                     f"{VOLS}[4].memoryDump.hotpluggable", "must be true", id="not-hotpluggable"),
        pytest.param({**_DUMP, "memoryDump": {"claimName": "dump", "hotpluggable": True,
                                              "readOnly": True}},
                     f"{VOLS}[4].memoryDump.readOnly", "not read-only", id="read-only"),
        pytest.param({**_DUMP, "memoryDump": {"claimName": "Bad_Name", "hotpluggable": True}},
                     f"{VOLS}[4].memoryDump.claimName", "", id="bad-claim-name"),
    ],
)  # fmt: skip
def test_memory_dump_volume_rules(volume: dict[str, Any], path: str, fragment: str) -> None:
    """A memoryDump volume (no disk's) is named after its claim, hotpluggable, writable."""
    errors = vmi_errors({f"{VOLS}[4]": volume})
    assert any(fragment in m for m in messages_at(errors, path)), [str(e) for e in errors]


def test_a_memory_dump_volume_needs_no_disk_and_one_at_most() -> None:
    """A memoryDump volume without a disk is valid; a second one is refused."""
    assert vmi_errors({f"{VOLS}[4]": _DUMP}) == []
    second = {**_DUMP, "name": "d2", "memoryDump": {"claimName": "d2", "hotpluggable": True}}
    errors = vmi_errors({f"{VOLS}[4]": _DUMP, f"{VOLS}[5]": second})
    assert messages_at(errors, f"{VOLS}[5].memoryDump") == [
        "must have max one memory dump volume set"
    ]
