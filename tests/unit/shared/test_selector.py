"""metav1.LabelSelector: matching and the selector string status.labelSelector carries."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from shared.model import LabelSelector


def sel(raw: Mapping[str, Any]) -> LabelSelector:
    return LabelSelector.from_dict(raw)


@pytest.mark.parametrize(
    ("raw", "labels", "expected"),
    [
        pytest.param({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True, id="labels-subset"),
        pytest.param({"matchLabels": {"a": "1"}}, {"a": "2"}, False, id="label-differs"),
        pytest.param({}, {"x": "y"}, True, id="empty-matches-all"),
        pytest.param(
            {"matchExpressions": [{"key": "t", "operator": "In", "values": ["x", "y"]}]},
            {"t": "y"},
            True,
            id="in",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["x"]}]},
            {"t": "x"},
            False,
            id="notin",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "t", "operator": "DoesNotExist"}]},
            {},
            True,
            id="does-not-exist",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "t", "operator": "Exists"}]}, {}, False, id="exists"
        ),
    ],
)
def test_matches(raw: Mapping[str, Any], labels: dict[str, str], expected: bool) -> None:
    """Every label and every expression must hold."""
    assert sel(raw).matches(labels) is expected


def test_render_sorts_by_key_as_kubernetes_does() -> None:
    """matchLabels and expressions together, sorted by key, values sorted."""
    raw = {
        "matchLabels": {"z": "1", "a": "2"},
        "matchExpressions": [
            {"key": "m", "operator": "In", "values": ["y", "x"]},
            {"key": "b", "operator": "DoesNotExist"},
        ],
    }
    assert sel(raw).render() == "a=2,!b,m in (x,y),z=1"
