"""Fixtures for tests on real nodes. The session ones (``real_cluster``, ``real_kubectl``,
``real_stack``, ``fault_windows``) live in fixtures.py, registered once in tests/conftest.py.

- ``_record_fault_window`` (autouse): a test marked ``faults`` adds its time to
  ``fault_windows``;
- ``real_namespace``: a fresh namespace, its VMs and VMIs gone before it is deleted.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest

from localkube.deploy import Kubectl
from tests.integration.realnodes.logscan import FAULT_GRACE, Window


@pytest.fixture(autouse=True)
def _record_fault_window(
    request: pytest.FixtureRequest, fault_windows: list[Window]
) -> Iterator[None]:
    if request.node.get_closest_marker("faults") is None:
        yield
        return
    start = time.time()
    yield
    fault_windows.append((start, time.time() + FAULT_GRACE))


@pytest.fixture
def real_namespace(real_kubectl: Kubectl) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    real_kubectl("create", "namespace", name)
    yield name
    # VMs first, and their VMIs gone, before the namespace: a VM whose VMI vanishes while its
    # namespace terminates makes the controller's re-create meet "namespace is being
    # terminated" (403), which the story test's RBAC check would count as a refusal.
    real_kubectl("delete", "vm", "--all", "-n", name, "--wait=true", "--timeout=120s", check=False)
    real_kubectl("delete", "vmi", "--all", "-n", name, "--wait=true", "--timeout=120s", check=False)
    real_kubectl("delete", "namespace", name, "--wait=false", check=False)


def pods(kubectl: Kubectl, ns: str, selector: str = "") -> list[dict[str, object]]:
    args = ["get", "pods", "-n", ns, "-o", "json", *(["-l", selector] if selector else [])]
    items: list[dict[str, object]] = json.loads(kubectl(*args))["items"]
    return items
