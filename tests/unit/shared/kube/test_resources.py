"""REST paths, key helpers and the Status → error mapping."""

from __future__ import annotations

import pytest

from shared.kube.errors import AlreadyExists, Conflict, Gone, error_from_status
from shared.kube.resources import (
    EVENTS,
    LEASES,
    NODES,
    PODS,
    VMIMS,
    VMIS,
    VMS,
    Resource,
    object_key,
    split_key,
)


@pytest.mark.parametrize(
    ("resource", "kwargs", "path"),
    [
        pytest.param(PODS, {"namespace": "ns"}, "/api/v1/namespaces/ns/pods", id="pods-list"),
        pytest.param(PODS, {}, "/api/v1/pods", id="pods-all-namespaces"),
        pytest.param(
            NODES, {"namespace": "x", "name": "n1"}, "/api/v1/nodes/n1", id="cluster-scoped"
        ),
        pytest.param(EVENTS, {"namespace": "ns"}, "/api/v1/namespaces/ns/events", id="events"),
        pytest.param(
            LEASES,
            {"namespace": "kv", "name": "l"},
            "/apis/coordination.k8s.io/v1/namespaces/kv/leases/l",
            id="lease",
        ),
        pytest.param(
            VMIS,
            {"namespace": "ns", "name": "v", "subresource": "status"},
            "/apis/kubevirt.io/v1/namespaces/ns/virtualmachineinstances/v/status",
            id="vmi-status",
        ),
        pytest.param(
            VMS,
            {"namespace": "ns", "name": "v"},
            "/apis/kubevirt.io/v1/namespaces/ns/virtualmachines/v",
            id="vm",
        ),
        pytest.param(
            VMIMS,
            {"namespace": "ns"},
            "/apis/kubevirt.io/v1/namespaces/ns/virtualmachineinstancemigrations",
            id="vmim",
        ),
        pytest.param(
            PODS,
            {"namespace": "ns", "name": "a/b"},
            "/api/v1/namespaces/ns/pods/a%2Fb",
            id="escaped",
        ),
    ],
)
def test_paths(resource: Resource, kwargs: dict[str, str], path: str) -> None:
    """Each resource builds its REST path (core and group APIs alike)."""
    assert resource.path(**kwargs) == path


def test_template_hides_names() -> None:
    """The metrics URL template replaces namespace and name with placeholders."""
    assert VMIS.template(namespaced=True, named=True, subresource="status") == (
        "/apis/kubevirt.io/v1/namespaces/{namespace}/virtualmachineinstances/{name}/status"
    )


@pytest.mark.parametrize(
    ("obj", "key"),
    [
        pytest.param({"metadata": {"name": "a", "namespace": "ns"}}, "ns/a", id="namespaced"),
        pytest.param({"metadata": {"name": "n1"}}, "n1", id="cluster-scoped"),
        pytest.param({}, "", id="no-metadata"),
    ],
)
def test_object_key(obj: dict[str, object], key: str) -> None:
    """object_key is "namespace/name", or "name" without a namespace."""
    assert object_key(obj) == key


def test_split_key() -> None:
    """split_key inverts object_key."""
    assert split_key("ns/a") == ("ns", "a")
    assert split_key("n1") == (None, "n1")


@pytest.mark.parametrize(
    ("status", "body", "cls"),
    [
        pytest.param(409, {"reason": "AlreadyExists"}, AlreadyExists, id="exists"),
        pytest.param(409, None, Conflict, id="conflict-without-body"),
        pytest.param(200, {"code": 410, "reason": "Expired"}, Gone, id="code-in-body-wins"),
    ],
)
def test_error_from_status(
    status: int, body: dict[str, object] | None, cls: type[Exception]
) -> None:
    """The Status body's code and reason choose the error class."""
    assert type(error_from_status(status, body)) is cls
