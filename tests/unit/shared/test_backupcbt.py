"""Changed block tracking as KubeVirt 1.8 decides it (shared.backupcbt): the gate, then
the KubeVirt CR's VM or namespace label selector; a malformed selector is refused at
admission naming its field."""

from __future__ import annotations

from typing import Any

import pytest

from shared.backupcbt import cbt_refusal, cbt_selector_errors, needs_namespace_labels
from shared.model.kubevirt import KubeVirt
from virt_api.admission.validate import validate

GATE = frozenset({"IncrementalBackup"})


def kv(selectors: dict[str, Any] | None) -> KubeVirt:
    config = {"changedBlockTrackingLabelSelectors": selectors} if selectors is not None else {}
    return KubeVirt.from_dict({"metadata": {"name": "kubevirt"}, "spec": {"configuration": config}})


@pytest.mark.parametrize(
    ("gates", "selectors", "vm", "ns", "words"),
    [
        pytest.param(
            frozenset(), {"virtualMachineLabelSelector": {}}, {}, None, "feature gate", id="no-gate"
        ),
        pytest.param(GATE, None, {}, None, "sets no changedBlockTrackingLabelSelectors", id="none"),
        pytest.param(
            GATE,
            {"virtualMachineLabelSelector": {"matchLabels": {"a": "b"}}},
            {"a": "c"},
            None,
            "not enabled",
            id="no-match",
        ),
        pytest.param(
            GATE,
            {"namespaceLabelSelector": {"matchLabels": {"cbt": "on"}}},
            {},
            {"cbt": "off"},
            "not enabled",
            id="ns-no-match",
        ),
        pytest.param(
            GATE,
            {"virtualMachineLabelSelector": {"matchLabels": {"a": "b"}}},
            {"a": "b"},
            None,
            "",
            id="vm-match",
        ),
        pytest.param(
            GATE,
            {"namespaceLabelSelector": {"matchLabels": {"cbt": "on"}}},
            {},
            {"cbt": "on"},
            "",
            id="ns-match",
        ),
    ],
)
def test_cbt_refusal(
    gates: frozenset[str], selectors: Any, vm: dict[str, str], ns: Any, words: str
) -> None:
    """Refused naming what is missing (the gate, the selectors, a match); "" when on."""
    config = kv(selectors).spec.configuration
    why = cbt_refusal(config, gates=gates, vm_labels=vm, namespace_labels=ns)
    assert (words in why and why != "") if words else why == ""


def test_namespace_labels_are_read_only_for_a_namespace_selector() -> None:
    """The controller reads the namespace only when a namespace selector is set."""
    assert needs_namespace_labels(kv({"namespaceLabelSelector": {}}).spec.configuration)
    assert not needs_namespace_labels(kv({"virtualMachineLabelSelector": {}}).spec.configuration)


def test_bad_selectors_are_refused_naming_the_field() -> None:
    """A matchExpression without a key or with In and no values: refused at admission."""
    bad = {"virtualMachineLabelSelector": {"matchExpressions": [{"operator": "In", "values": []}]}}
    paths = {e.path for e in cbt_selector_errors(kv(bad))}
    base = "spec.configuration.changedBlockTrackingLabelSelectors.virtualMachineLabelSelector"
    assert {f"{base}.matchExpressions[0].key", f"{base}.matchExpressions[0].values"} <= paths
    raw = kv(bad).to_dict()
    raw.update(apiVersion="kubevirt.io/v1", kind="KubeVirt")
    assert f"{base}.matchExpressions[0].key" in {e.path for e in validate("KubeVirt", raw)}
