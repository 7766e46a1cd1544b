"""The launcher pod's node resources from the VMI and the KubeVirt CR: node selectors for
cpu.model and cpu.features on the node labeller's keys, and memoryOvercommit /
cpuAllocationRatio applied to the requests (with numbers)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.config import Config, TemplateConfig
from controller.kubevirt.live import cluster_defaults, template_config
from controller.services.overhead import MIB, guest_request_bytes
from controller.services.template import TemplateService
from shared.clusterconfig import resolve
from shared.labels import SCHEDULABLE_LABEL
from shared.model.kubevirt import KubeVirt
from tests.unit.controller.builders import make_migration, make_vmi, vmi_dict

OVERHEAD_MIB = 153  # 128 MiB, 1 vCPU, emulated (controller/services/overhead.py)


def _pod(cpu: dict[str, Any], **cfg: Any) -> dict[str, Any]:
    raw = vmi_dict()
    raw["spec"]["domain"]["cpu"] = cpu
    raw["spec"]["nodeSelector"] = {"disk": "ssd"}
    return TemplateService(TemplateConfig(**cfg)).launcher_pod(make_vmi(raw=raw))


@pytest.mark.parametrize(
    ("cpu", "expected"),
    [
        pytest.param({}, {}, id="no-model"),
        pytest.param({"model": "host-model"}, {}, id="host-model"),
        pytest.param({"model": "host-passthrough"}, {}, id="host-passthrough"),
        pytest.param(
            {"model": "Westmere"}, {"cpu-model.node.kubevirt.io/Westmere": "true"}, id="named"
        ),
        pytest.param(
            {
                "features": [
                    {"name": "pcid"},
                    {"name": "aes", "policy": "require"},
                    {"name": "vme", "policy": "disable"},
                    {"name": "x2apic", "policy": "optional"},
                    {"name": "sse2", "policy": "force"},
                ]
            },
            {
                "cpu-feature.node.kubevirt.io/pcid": "true",
                "cpu-feature.node.kubevirt.io/aes": "true",
            },
            id="required-features-only",
        ),
    ],
)
def test_node_selector_for_the_cpu(cpu: dict[str, Any], expected: dict[str, str]) -> None:
    """A named model and required (or unset-policy) features select their labels, next to
    the VMI's own selector and the schedulable label; the rest select nothing."""
    selector = _pod(cpu)["spec"]["nodeSelector"]
    assert selector == {"disk": "ssd", SCHEDULABLE_LABEL: "true", **expected}


def test_forbidden_features_avoid_labelled_nodes_in_every_term() -> None:
    """forbid: `DoesNotExist` on the feature's key, added to each of the VMI's ORed terms."""
    raw = vmi_dict()
    raw["spec"]["domain"]["cpu"] = {"features": [{"name": "avx512f", "policy": "forbid"}]}
    terms = [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
    ]
    raw["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }
    pod = TemplateService(TemplateConfig()).launcher_pod(make_vmi(raw=raw))
    required = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    absent = {"key": "cpu-feature.node.kubevirt.io/avx512f", "operator": "DoesNotExist"}
    first, second = required["nodeSelectorTerms"]
    assert first["matchExpressions"] == [terms[0]["matchExpressions"][0], absent]
    assert (
        second["matchExpressions"] == [absent] and second["matchFields"] == terms[1]["matchFields"]
    )


def test_a_migration_target_keeps_the_model_selector() -> None:
    """The target pod must land on a node with the model too."""
    raw = vmi_dict()
    raw["spec"]["domain"]["cpu"] = {"model": "Penryn"}
    pod = TemplateService(TemplateConfig()).target_pod(
        make_vmi(raw=raw), make_migration(), source_node="node01"
    )
    assert pod["spec"]["nodeSelector"]["cpu-model.node.kubevirt.io/Penryn"] == "true"


@pytest.mark.parametrize(
    ("guest_mib", "requested_mib", "percent", "expected"),
    [
        pytest.param(128, None, 100, 128 * MIB, id="no-overcommit"),
        pytest.param(128, 128, 150, 128 * MIB * 100 // 150, id="150-percent"),
        pytest.param(1024, 1024, 200, 512 * MIB, id="200-percent-halves"),
        pytest.param(128, 128, 50, 256 * MIB, id="under-commit-doubles"),
        pytest.param(128, 96, 200, 96 * MIB, id="explicit-request-kept"),
    ],
)
def test_memory_overcommit_math(
    guest_mib: int, requested_mib: int | None, percent: int, expected: int
) -> None:
    """KubeVirt's rule: request = guest * 100 / memoryOvercommit (rounded down); a request
    set apart from the guest memory is kept."""
    requested = None if requested_mib is None else requested_mib * MIB
    got = guest_request_bytes(
        guest=guest_mib * MIB, requested=requested, overcommit_percent=percent
    )
    assert got == expected


def test_the_kubevirt_crs_overcommit_and_allocation_ratio_reach_new_pods() -> None:
    """memoryOvercommit 200 and cpuAllocationRatio 4 from the CR: a 128 MiB, 2-vCPU VMI's
    pod requests 64 MiB + overhead (161 MiB: 8 MiB more for the second vCPU) and 500m."""
    config = Config.from_args([], environ={})
    cr = KubeVirt.from_dict(
        {
            "spec": {
                "configuration": {
                    "developerConfiguration": {"memoryOvercommit": 200, "cpuAllocationRatio": 4}
                }
            }
        }
    )
    cluster = resolve(cluster_defaults(config), cr)
    service = TemplateService(template_config(config.template, cluster))
    raw = vmi_dict()
    raw["spec"]["domain"]["cpu"] = {"sockets": 2}
    raw["spec"]["domain"]["resources"] = {"requests": {"memory": "128Mi"}}
    requests = service.launcher_pod(make_vmi(raw=raw))["spec"]["containers"][0]["resources"]
    assert int(requests["requests"]["memory"]) == (64 + OVERHEAD_MIB + 8) * MIB
    assert requests["requests"]["cpu"] == "500m"
    plain = TemplateService(template_config(config.template, cluster_defaults(config)))
    plain_requests = plain.launcher_pod(make_vmi(raw=raw))["spec"]["containers"][0]["resources"]
    assert int(plain_requests["requests"]["memory"]) == (128 + OVERHEAD_MIB + 8) * MIB


def test_overcommit_guest_overhead_leaves_the_overhead_out_of_the_request() -> None:
    """resources.overcommitGuestOverhead: the pod requests the guest memory alone, while
    its memory limit still carries the overhead (KubeVirt's meaning)."""
    raw = vmi_dict()
    raw["spec"]["domain"]["resources"] = {
        "overcommitGuestOverhead": True,
        "requests": {"memory": "128Mi"},
        "limits": {"memory": "128Mi"},
    }
    pod = TemplateService(TemplateConfig()).launcher_pod(make_vmi(raw=raw))
    (compute,) = [c for c in pod["spec"]["containers"] if c["name"] == "compute"]
    assert compute["resources"]["requests"]["memory"] == str(128 * MIB)
    assert compute["resources"]["limits"]["memory"] == str((128 + OVERHEAD_MIB) * MIB)
    raw["spec"]["domain"]["resources"]["overcommitGuestOverhead"] = False
    pod = TemplateService(TemplateConfig()).launcher_pod(make_vmi(raw=raw))
    (compute,) = [c for c in pod["spec"]["containers"] if c["name"] == "compute"]
    assert compute["resources"]["requests"]["memory"] == str((128 + OVERHEAD_MIB) * MIB)
