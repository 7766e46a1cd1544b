"""manifests/base/subresources agree with the code: names, ports and the RBAC per action."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.actions import (
    ALL_ACTIONS,
    GROUP,
    TOP_LEVEL,
    VERSION,
    VM_ACTIONS,
    VMAction,
)
from virt_api.subresources.config import DEFAULT_PORT

DIR = Path(__file__).resolve().parents[4] / "manifests" / "base" / "subresources"


def docs() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(DIR.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            out += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return out


def one(kind: str, name: str) -> dict[str, Any]:
    found = [d for d in docs() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


def granted(role: dict[str, Any]) -> set[tuple[str, str]]:
    """(resource, verb) pairs a role grants in subresources.kubevirt.io."""
    return {
        (resource, verb)
        for rule in role["rules"]
        if GROUP in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_kustomization_lists_every_file() -> None:
    """No manifest in the folder is left out of its kustomization."""
    listed = yaml.safe_load((DIR / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(p.name for p in DIR.glob("*.yaml") if p.stem != "kustomization")


def test_apiservice_points_at_the_service() -> None:
    """v1.subresources.kubevirt.io → Service port 443 (name https) → the API's port; TLS
    verification stays on and the caBundle is left to gen-certs."""
    api = one("APIService", f"{VERSION}.{GROUP}")
    spec = api["spec"]
    assert (spec["group"], spec["version"]) == (GROUP, VERSION)
    assert spec["insecureSkipTLSVerify"] is False
    assert "caBundle" not in spec
    ref = spec["service"]
    svc = one("Service", ref["name"])
    assert svc["metadata"]["namespace"] == ref["namespace"]
    (port,) = svc["spec"]["ports"]
    assert (port["name"], port["port"], port["targetPort"]) == ("https", ref["port"], DEFAULT_PORT)


@pytest.mark.parametrize("role", ["kubevirt.io:admin", "kubevirt.io:edit"])
def test_admin_and_edit_may_call_every_action(role: str) -> None:
    """Exactly every action, VMI's and VM's (start/stop/restart/migrate), with the verb
    kube-apiserver derives from its method."""
    expected = {(f"{spec.resource}/{spec.action}", spec.verb) for spec in ALL_ACTIONS}
    assert granted(one("ClusterRole", role)) == expected | set(TOP_LEVEL.items())


def test_view_may_read_but_not_act_or_attach() -> None:
    """view gets the read-only queries (expand-spec and expand-vm-spec included): no state
    change (no VM verb), no console."""
    expected = {
        (f"{spec.resource}/{spec.action}", "get")
        for spec in ALL_ACTIONS
        if spec.verb == "get" and not spec.stream
    }
    assert granted(one("ClusterRole", "kubevirt.io:view")) == expected | set(TOP_LEVEL.items())


@pytest.mark.parametrize(
    ("role", "label"),
    [
        ("kubevirt.io:admin", "rbac.authorization.k8s.io/aggregate-to-admin"),
        ("kubevirt.io:edit", "rbac.authorization.k8s.io/aggregate-to-edit"),
        ("kubevirt.io:view", "rbac.authorization.k8s.io/aggregate-to-view"),
    ],
)
def test_roles_aggregate_into_the_builtin_ones(role: str, label: str) -> None:
    """A RoleBinding to the built-in admin/edit/view carries the actions along."""
    assert one("ClusterRole", role)["metadata"]["labels"][label] == "true"


def test_controller_may_review_and_read_the_front_proxy_ca() -> None:
    """auth-delegator (SAR create) cluster-wide; the authentication reader in kube-system."""
    delegator = one("ClusterRoleBinding", "kubevirt-py:virt-controller:auth-delegator")
    assert delegator["roleRef"]["name"] == "system:auth-delegator"
    reader = one("RoleBinding", "kubevirt-py:virt-controller:authentication-reader")
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "extension-apiserver-authentication-reader",
    }
    subjects = {(s["kind"], s["namespace"], s["name"]) for s in delegator["subjects"]}
    assert subjects == {("ServiceAccount", "kubevirt", "virt-controller")}


def test_every_authenticated_user_may_read_the_version() -> None:
    """GET …/v1/version is `list` on "version" to kube-apiserver, so both verbs are granted,
    to system:authenticated."""
    assert granted(one("ClusterRole", "kubevirt.io:default")) == {
        ("version", "get"),
        ("version", "list"),
        ("healthz", "get"),
        ("healthz", "list"),
    }
    binding = one("ClusterRoleBinding", "kubevirt.io:default")
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}
    ]


def test_migrate_role_grants_migrations_alone() -> None:
    """kubevirt.io:migrate: the migrate subresource and VMIMs, nothing else, not aggregated."""
    role = one("ClusterRole", "kubevirt.io:migrate")
    spec = VM_ACTIONS[VMAction.MIGRATE]
    assert granted(role) == {(f"{spec.resource}/{spec.action}", "update")}
    kubevirt = [r for r in role["rules"] if "kubevirt.io" in r["apiGroups"]]
    assert [r["resources"] for r in kubevirt] == [["virtualmachineinstancemigrations"]]
    assert not any(k.startswith("rbac.authorization.k8s.io/") for k in role["metadata"]["labels"])


def test_controller_may_make_the_vm_verbs_writes() -> None:
    """start/stop/restart/migrate are written by the controller: VM + status patches, VMI
    patch, VMIM create, launcher pod delete."""
    role = one("ClusterRole", "kubevirt-py:virt-controller:subresources")
    rights = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert {
        ("kubevirt.io", "virtualmachines", "patch"),
        ("kubevirt.io", "virtualmachines/status", "patch"),
        ("kubevirt.io", "virtualmachineinstances", "patch"),
        ("kubevirt.io", "virtualmachineinstancemigrations", "create"),
        ("", "pods", "list"),
        ("", "pods", "delete"),
    } <= rights
