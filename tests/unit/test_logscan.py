"""The real-node suite's last check (tests/integration/realnodes/logscan.py) finds work items
that failed with a traceback in a daemon's JSON log, and nothing else."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import pytest
import structlog

from shared.logs import configure
from tests.integration.realnodes.logscan import failures_in


def _line(**entry: object) -> str:
    return json.dumps(entry)


def test_failed_work_items_with_a_traceback_are_found() -> None:
    """work_item_failed and sync_unexpected_error lines that carry a traceback are reported
    with their pod, event, key and the exception's last line."""
    text = "\n".join(
        [
            _line(event="work_item_failed", key="ns/a", exception="Traceback (most recent call last):\n  x\nValueError: boom"),
            _line(event="sync_unexpected_error", key="ns/b", exception="Traceback (most recent call last):\nKeyError: 'k'"),
        ]
    )  # fmt: skip
    found = list(failures_in(text, pod="virt-handler-x"))
    assert [(f.event, f.key) for f in found] == [
        ("work_item_failed", "ns/a"),
        ("sync_unexpected_error", "ns/b"),
    ]
    assert str(found[0]) == "virt-handler-x: work_item_failed key=ns/a: ValueError: boom"


def test_other_lines_are_not_failures() -> None:
    """Typed sync errors, other events with tracebacks, plain text and broken JSON are not
    reported."""
    text = "\n".join(
        [
            _line(event="sync_failed", key="ns/a", reason="DiskError"),
            _line(event="launcher_gone", exception="Traceback (most recent call last):\nOSError"),
            "Traceback (most recent call last): not JSON",
            '{"event": "work_item_failed", "exception": "Traceback',
            _line(event="work_item_failed", key="ns/c"),
        ]
    )
    assert list(failures_in(text, pod="p")) == []


def test_the_daemons_json_log_carries_what_the_scan_reads(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A work item failure logged through the daemons' own structlog set-up renders as a
    line the scan recognizes (event, key and the traceback in `exception`)."""
    configure("json", level=logging.INFO)
    try:
        try:
            raise ValueError("boom")
        except ValueError:
            structlog.get_logger().exception("work_item_failed", queue="q", key="ns/a")
    finally:
        structlog.reset_defaults()
    out = capsys.readouterr()
    text = out.out + out.err
    (found,) = failures_in(text, pod="p")
    assert found.key == "ns/a" and found.exception.rstrip().endswith("ValueError: boom")


def test_failures_inside_a_fault_window_are_told_apart() -> None:
    """A failure's structlog timestamp places it inside or outside the windows of tests
    that inject faults; one without a timestamp is never excused."""
    text = "\n".join(
        [
            _line(event="work_item_failed", key="in", timestamp="2026-11-29T09:00:10.5Z",
                  exception="Traceback (most recent call last):\nOSError"),
            _line(event="work_item_failed", key="out", timestamp="2026-11-29T09:05:00Z",
                  exception="Traceback (most recent call last):\nOSError"),
            _line(event="work_item_failed", key="none",
                  exception="Traceback (most recent call last):\nOSError"),
        ]
    )  # fmt: skip
    start = datetime(2026, 11, 29, 9, 0, 0, tzinfo=UTC).timestamp()
    windows = [(start, start + 60.0)]
    found = {f.key: f.within(windows) for f in failures_in(text, pod="p")}
    assert found == {"in": True, "out": False, "none": False}
