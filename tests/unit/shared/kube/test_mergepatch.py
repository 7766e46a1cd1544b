"""JSON merge patch: diff two documents, apply the diff to a third."""

from __future__ import annotations

from typing import Any

import pytest

from shared.kube.mergepatch import merge_apply, merge_diff


@pytest.mark.parametrize(
    ("old", "new", "patch"),
    [
        pytest.param({"a": 1}, {"a": 1}, {}, id="equal"),
        pytest.param({"a": 1}, {"a": 2}, {"a": 2}, id="changed-scalar"),
        pytest.param({"a": 1}, {}, {"a": None}, id="removed-key"),
        pytest.param({}, {"a": {"b": 1}}, {"a": {"b": 1}}, id="added-object"),
        pytest.param(
            {"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3}}, {"a": {"c": 3}}, id="nested"
        ),
        pytest.param({"l": [1, 2]}, {"l": [1, 2, 3]}, {"l": [1, 2, 3]}, id="lists-are-atoms"),
        pytest.param({"a": {"b": 1}}, {"a": 5}, {"a": 5}, id="object-to-scalar"),
    ],
)
def test_diff(old: dict[str, Any], new: dict[str, Any], patch: dict[str, Any]) -> None:
    """merge_diff returns the minimal RFC 7386 patch, and applying it to old yields new."""
    assert merge_diff(old, new) == patch
    assert merge_apply(old, patch) == new


def test_apply_keeps_fields_the_patch_does_not_touch() -> None:
    """Re-applying our diff onto someone else's newer document keeps their changes."""
    ours_before = {"phase": "Scheduling", "nodeName": ""}
    ours_after = {"phase": "Scheduled", "nodeName": "n1"}
    theirs = {"phase": "Scheduling", "nodeName": "", "conditions": [{"type": "Ready"}]}
    result = merge_apply(theirs, merge_diff(ours_before, ours_after))
    assert result == {"phase": "Scheduled", "nodeName": "n1", "conditions": [{"type": "Ready"}]}


def test_apply_does_not_mutate_inputs() -> None:
    """Neither the target nor the patch is modified."""
    target = {"a": {"b": [1]}}
    patch = {"a": {"c": [2]}}
    result = merge_apply(target, patch)
    result["a"]["b"].append(9)
    result["a"]["c"].append(9)
    assert target == {"a": {"b": [1]}} and patch == {"a": {"c": [2]}}
