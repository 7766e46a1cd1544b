"""virtctl-py memory-dump (virtctl_py/memorydump.py): the PUTs KubeVirt's virtctl makes,
the claim --create-claim makes (sized as KubeVirt's), and its refusals."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from shared.kube import NotFound
from shared.kube.resources import Resource
from virtctl_py.cli import build
from virtctl_py.errors import CliError
from virtctl_py.memorydump import claim_body, memory_dump
from virtctl_py.session import Target


class FakeKube:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.created: list[dict[str, Any]] = []

    async def call_subresource(self, method: str, resource: Resource, name: str, *,
                               namespace: str | None, subresource: str,
                               body: Any = None) -> dict[str, Any]:  # fmt: skip
        self.calls.append((method, subresource, body))
        return {}

    async def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> Any:
        if resource.plural == "persistentvolumeclaims":
            raise NotFound(404, "NotFound", name)
        if resource.plural == "virtualmachines":
            return {"metadata": {"name": name}}
        return {"metadata": {"name": name}, "spec": {"domain": {"memory": {"guest": "128Mi"}}}}

    async def create(self, resource: Resource, body: Any, *, namespace: str | None = None) -> Any:
        self.created.append(body)
        return body


def _args(*argv: str) -> argparse.Namespace:
    return build().parse_args(["memory-dump", *argv])


async def test_get_with_create_claim_makes_the_claim_then_asks_for_the_dump() -> None:
    """--create-claim: a ReadWriteOnce claim of (128Mi + 100Mi) x 1.055 (1 MiB aligned), PUT
    memorydump {claimName}; remove PUTs removememorydump."""
    kube, target = FakeKube(), _target()
    out = await memory_dump(kube, target, _args("get", "vm", "--claim-name=d", "--create-claim"))  # type: ignore[arg-type]
    assert "Successfully submitted memory dump request of VM vm" in out
    (claim,) = kube.created
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    # KubeVirt's virtctl: (128Mi + 100Mi) x 1.055, aligned up to 1 MiB = 241Mi
    assert claim["spec"]["resources"]["requests"]["storage"] == str(241 * 1024 * 1024)
    assert kube.calls == [("PUT", "memorydump", {"claimName": "d"})]
    await memory_dump(kube, target, _args("remove", "vm"))  # type: ignore[arg-type]
    assert kube.calls[-1] == ("PUT", "removememorydump", None)


def _target() -> Target:
    return Target(kubeconfig=Path("/nowhere"), context=None, namespace="ns")


def test_a_read_only_claim_is_refused() -> None:
    """KubeVirt's words for an access mode a dump cannot be written to."""
    with pytest.raises(CliError, match="invalid access mode"):
        claim_body("d", size=1, storage_class=None, access_mode="ReadOnlyMany")
    body = claim_body("d", size=1, storage_class="fast", access_mode="ReadWriteMany")
    assert (body["spec"]["storageClassName"], body["spec"]["accessModes"]) == (
        "fast", ["ReadWriteMany"]
    )  # fmt: skip


async def test_create_claim_needs_a_claim_name() -> None:
    """--create-claim without --claim-name is a usage error."""
    with pytest.raises(CliError, match="missing claim name"):
        await memory_dump(FakeKube(), _target(), _args("get", "vm", "--create-claim"))  # type: ignore[arg-type]
