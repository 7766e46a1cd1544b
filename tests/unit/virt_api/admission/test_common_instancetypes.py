"""KubeVirt's common-instancetypes bundle (shipped inside the kubevirt.io/kubevirt Go
module; scripts/common-instancetypes finds it in the Go module cache, where ./scripts/test
and ./scripts/up fetch it; missing, these tests fail): every resource is admitted
unchanged by kubevirt-py's admission (no refusal, no mutation), and a VM using them is
admitted, or refused naming the instancetype or preference field behind each VMI field
kubevirt-py does not honour yet."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

import yaml

from shared.kube import Resource
from shared.model import FieldError, VirtualMachine
from shared.model.validation import ValidationLimits
from virt_api.admission.defaults import Defaults, mutate
from virt_api.admission.instancetypes import instancetype_errors
from virt_api.admission.validate import validate

REPO = Path(__file__).resolve().parents[4]
INSTANCETYPES = 65  # KubeVirt v1.8.2's copy
PREFERENCES = 54


@functools.cache
def bundle() -> tuple[dict[str, Any], ...]:
    """Every resource of the bundle (the script prints its directory; it fails, and so does
    this test, when the module is neither cached nor downloadable)."""
    ran = subprocess.run(
        [str(REPO / "scripts" / "common-instancetypes"), "--files"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, f"scripts/common-instancetypes failed:\n{ran.stderr[-2000:]}"
    files = [Path(line) for line in ran.stdout.split()]
    assert files, "the common-instancetypes bundle has no YAML file"
    docs = [d for f in files for d in yaml.safe_load_all(f.read_text()) if d]
    return tuple(docs)


def _kinds(kind: str) -> list[dict[str, Any]]:
    return [d for d in bundle() if d.get("kind") == kind]


def test_the_bundle_is_kubevirt_v1_8_2s() -> None:
    """65 cluster instancetypes and 54 cluster preferences, nothing else."""
    assert len(_kinds("VirtualMachineClusterInstancetype")) == INSTANCETYPES
    assert len(_kinds("VirtualMachineClusterPreference")) == PREFERENCES
    assert len(bundle()) == INSTANCETYPES + PREFERENCES


def test_every_resource_is_admitted_unchanged() -> None:
    """No resource is refused (the refusals are listed, each with its fields) and none
    is mutated."""
    refused = {
        f"{d['kind']}/{d['metadata']['name']}": [str(e) for e in validate(d["kind"], d)]
        for d in bundle()
    }
    assert {k: v for k, v in refused.items() if v} == {}
    assert [d["metadata"]["name"] for d in bundle() if mutate(d["kind"], d, Defaults())] == []


# Preferences whose every field lands on a VMI field kubevirt-py honours (more join as the
# VMI fields do: dedicated I/O threads, input devices, Hyper-V, a TPM, …).
HONOURED = {"alpine", "cirros", "debian", "fedora", "legacy", "linux", "linux.efi", "ubuntu"}


async def _vm_errors(instancetype: str, preference: str) -> list[FieldError]:
    objects = {d["metadata"]["name"]: d for d in bundle()}

    async def lookup(resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        found = objects.get(name)
        return found if found and found["kind"] == resource.kind else None

    vm = VirtualMachine.from_dict({
        "metadata": {"name": "vm", "namespace": "ns"},
        "spec": {
            "instancetype": {"name": instancetype}, "preference": {"name": preference},
            "template": {"spec": {
                "domain": {"devices": {"disks": [{"name": "root"}]}},
                "volumes": [{"name": "root", "containerDisk": {"image": "registry.local/g:v1"}}],
            }},
        },
    })  # fmt: skip
    limits = ValidationLimits()
    return await instancetype_errors(vm, lookup=lookup, defaults=Defaults(), limits=limits)


async def test_a_vm_with_each_preference_is_admitted_or_refused_naming_the_field() -> None:
    """u1.2xlarge (8 vCPUs, 32Gi: every requirement met) with each preference: admitted
    when all it sets is honoured (the Linux ones, at least), else refused naming the
    preference field and the VMI field (or the unmet requirement, the other architecture)."""
    admitted = set()
    for pref in _kinds("VirtualMachineClusterPreference"):
        name = pref["metadata"]["name"]
        errors = await _vm_errors("u1.2xlarge", name)
        if not errors:
            admitted.add(name)
        for e in errors:
            named = " field spec." in e.message or "preference requires architecture" in e.message
            assert named, (name, str(e))
    assert admitted >= HONOURED, HONOURED - admitted


async def test_instancetypes_with_hugepages_or_dedicated_cpus_are_admitted() -> None:
    """Every bundle instancetype with u1's alpine preference is admitted, those with
    hugepages or dedicated CPUs (cx1, m1, rt1 …) too: their fields are honoured."""
    for it in _kinds("VirtualMachineClusterInstancetype"):
        name = it["metadata"]["name"]
        errors = [str(e) for e in await _vm_errors(name, "alpine")]
        assert errors == [], (name, errors)
