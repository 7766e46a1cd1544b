"""The pod-level fields a VMI carries to its launcher pod (KubeVirt's template service):
each exactly as written, the hostname rule, and a migration target's extra node term and
added node selector."""

from __future__ import annotations

import dataclasses
from typing import Any

from controller.config import TemplateConfig
from controller.services.scheduling import excluding_node, hostname, with_added_selector
from controller.services.template import TemplateService
from tests.unit.controller.builders import make_migration, make_vmi, vmi_dict

AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
            ]
        }
    },
    "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}
        ]
    },
}
POD_FIELDS: dict[str, Any] = {
    "affinity": AFFINITY,
    "tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}],
    "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    ],
    "schedulerName": "my-scheduler",
    "priorityClassName": "high",
    "hostname": "web-1",
    "subdomain": "web",
    "dnsPolicy": "None",
    "dnsConfig": {"nameservers": ["198.18.0.10"], "options": [{"name": "ndots", "value": "2"}]},
}


def _vmi(name: str = "vm1", **spec: Any) -> Any:
    raw = vmi_dict(name)
    raw["spec"].update(spec)
    return make_vmi(raw=raw)


def test_every_pod_field_is_carried_exactly() -> None:
    """Each pod-level field of the VMI is in the launcher pod's spec, as written."""
    pod = TemplateService(TemplateConfig()).launcher_pod(_vmi(**POD_FIELDS))
    for key, value in POD_FIELDS.items():
        assert pod["spec"][key] == value, key


def test_without_them_the_pod_only_gets_a_hostname() -> None:
    """A VMI without pod fields: none is invented, the hostname is the VMI's name."""
    pod = TemplateService(TemplateConfig()).launcher_pod(_vmi())
    assert pod["spec"]["hostname"] == "vm1"
    for key in set(POD_FIELDS) - {"hostname"}:
        assert key not in pod["spec"], key


def test_hostname_is_the_name_to_its_first_dot_and_63_characters() -> None:
    """KubeVirt's rule: the VMI name's first label, cut to a valid hostname."""
    assert hostname(_vmi("db.prod")) == "db"
    assert hostname(_vmi("x" * 62 + "-y")) == "x" * 62


def test_target_pod_keeps_the_vmis_affinity_and_avoids_the_source() -> None:
    """A migration target: every node term of the VMI also excludes the source node; the
    rest of the VMI's affinity stays."""
    svc = TemplateService(TemplateConfig())
    target = svc.target_pod(_vmi(affinity=AFFINITY), make_migration(), source_node="node01")
    affinity = target["spec"]["affinity"]
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    not_source = {"key": "metadata.name", "operator": "NotIn", "values": ["node01"]}
    assert [t["matchFields"] for t in terms] == [[not_source], [not_source]]
    assert [t["matchExpressions"][0]["values"] for t in terms] == [["a"], ["b"]]
    assert affinity["podAntiAffinity"] == AFFINITY["podAntiAffinity"]


def test_excluding_node_does_not_change_its_input() -> None:
    """The VMI's own affinity object is not modified."""
    before: dict[str, Any] = {"nodeAffinity": {}}
    excluding_node(before, "n")
    assert before == {"nodeAffinity": {}}


def test_target_pod_adds_the_migrations_node_selector() -> None:
    """A VMIM's addedNodeSelector joins the target pod's nodeSelector; a key the VMI sets
    keeps the VMI's value (it restricts, never bypasses); the VMI's affinity and the
    source-node exclusion stay; the VMI's own launcher pod is unchanged."""
    vmi = _vmi(affinity=AFFINITY, nodeSelector={"zone": "a"})
    m = make_migration()
    added = {"kubernetes.io/hostname": "node02", "zone": "b"}
    m = dataclasses.replace(m, spec=dataclasses.replace(m.spec, added_node_selector=added))
    svc = TemplateService(TemplateConfig())
    target = svc.target_pod(vmi, m, source_node="node01")
    assert target["spec"]["nodeSelector"] == {
        "zone": "a",
        "kubevirt.io/schedulable": "true",
        "kubernetes.io/hostname": "node02",
    }
    terms = target["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert all(t["matchFields"][-1]["values"] == ["node01"] for t in terms)
    assert "kubernetes.io/hostname" not in svc.launcher_pod(vmi)["spec"]["nodeSelector"]


def test_added_selector_does_not_change_its_input() -> None:
    """The pod's nodeSelector and the VMIM's map are not modified."""
    mine, added = {"a": "1"}, {"a": "2", "b": "3"}
    assert with_added_selector(mine, added) == {"a": "1", "b": "3"}
    assert mine == {"a": "1"} and added == {"a": "2", "b": "3"}
