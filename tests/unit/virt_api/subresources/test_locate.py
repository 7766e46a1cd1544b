"""Locating a VMI's handler: Running on a node whose handler published an endpoint."""

from __future__ import annotations

import pytest

from shared.kube import TransportError
from shared.model import VirtualMachineInstance
from tests.unit.virt_api.subresources.fakes import FakeReader, node, vmi
from virt_api.subresources.errors import (
    HandlerUnavailable,
    NotFound,
    NotRunning,
    SubresourceError,
    VmiRef,
)
from virt_api.subresources.locate import Target, locate

REF = VmiRef(namespace="ns1", name="vm1")


async def test_running_vmi_on_an_annotated_node() -> None:
    """The target is the VMI's node and that node's published endpoint."""
    reader = FakeReader(vmis={("ns1", "vm1"): vmi()}, nodes={"node01": node()})
    assert await locate(reader, REF) == Target(
        vmi=REF, node="node01", endpoint="https://10.0.0.5:8186"
    )


@pytest.mark.parametrize(
    ("reader", "error", "code"),
    [
        pytest.param(FakeReader(), NotFound, 404, id="vmi-missing"),
        pytest.param(
            FakeReader(vmis={("ns1", "vm1"): vmi(phase="Scheduled")}),
            NotRunning,
            409,
            id="not-running",
        ),
        pytest.param(
            FakeReader(vmis={("ns1", "vm1"): vmi(phase="Running", node="")}),
            NotRunning,
            409,
            id="no-node",
        ),
        pytest.param(
            FakeReader(vmis={("ns1", "vm1"): vmi()}, nodes={"node01": node(endpoint=None)}),
            HandlerUnavailable,
            503,
            id="no-annotation",
        ),
        pytest.param(
            FakeReader(vmis={("ns1", "vm1"): vmi()}, nodes={"node01": node(endpoint="10.0.0.5")}),
            HandlerUnavailable,
            503,
            id="annotation-not-a-url",
        ),
        pytest.param(
            FakeReader(vmis={("ns1", "vm1"): vmi()}, nodes={}),
            HandlerUnavailable,
            503,
            id="node-gone",
        ),
    ],
)
async def test_unlocatable_vmi(
    reader: FakeReader, error: type[SubresourceError], code: int
) -> None:
    """Each reason a VMI cannot be acted on has its own error and HTTP code."""
    with pytest.raises(error) as info:
        await locate(reader, REF)
    assert info.value.code == code
    assert info.value.to_status()["details"]["name"] == "vm1"


async def test_api_failure_is_a_500_status() -> None:
    """A failing API read is an InternalError Status, not an unhandled exception."""

    class Failing(FakeReader):
        async def get_vmi(self, namespace: str, name: str) -> VirtualMachineInstance:
            raise TransportError("connection refused")

    with pytest.raises(SubresourceError) as info:
        await locate(Failing(), REF)
    assert (info.value.code, info.value.to_status()["reason"]) == (500, "InternalError")
