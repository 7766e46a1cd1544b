"""LauncherTarget: from status.activePods to the launcher socket, over the real wire protocol."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from handler.actions import CONSOLE_SOCKET, NotOnThisNode
from handler.launcher_target import LauncherTarget
from shared.kube import NotFound
from shared.model import VirtualMachineInstance
from shared.podlayout import LAUNCHER_SOCKET
from shared.wire.errors import CommandFailed, ErrorCode
from shared.wire.launcher_api import Method
from shared.wire.server import RpcServer, ServerInfo
from tests.unit.virt_api.subresources.fakes import vmi

POD = "0b6f3e6c-1111-4a5e-9c49-2f1c1f3a7e01"
OTHER_POD = "0b6f3e6c-2222-4a5e-9c49-2f1c1f3a7e02"


def volumes(pods: Path, uid: str) -> Path:
    return pods / uid / "volumes" / "kubernetes.io~empty-dir"


def with_pods(active: Mapping[str, str], *, node: str = "node01") -> VirtualMachineInstance:
    base = vmi(node=node).to_dict()
    base["status"]["activePods"] = dict(active)
    return VirtualMachineInstance.from_dict(base)


@pytest.fixture
async def launcher(tmp_path: Path) -> AsyncIterator[Path]:
    """A launcher stand-in serving pause and get_guest_info on POD's launcher-sock."""
    server = RpcServer(info=ServerInfo(server="fake-launcher"))

    async def pause(_: Mapping[str, Any]) -> dict[str, Any]:
        return {"state": "Paused"}

    async def guest_info(_: Mapping[str, Any]) -> dict[str, Any]:
        raise CommandFailed(ErrorCode.AGENT_NOT_CONNECTED, "no guest agent")

    server.register(Method.PAUSE, pause)
    server.register(Method.GET_GUEST_INFO, guest_info)
    sockets = volumes(tmp_path, POD) / "sockets"
    sockets.mkdir(parents=True)
    started = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(server.serve(sockets / LAUNCHER_SOCKET, started=started))
        await started.wait()
        yield tmp_path
        task.cancel()


async def test_command_reaches_the_launcher_of_this_nodes_pod(launcher: Path) -> None:
    """The pod of this node in activePods is dialled; the result comes back decoded."""
    found = with_pods({OTHER_POD: "node02", POD: "node01"})

    async def get_vmi(namespace: str, name: str) -> VirtualMachineInstance:
        assert (namespace, name) == ("ns1", "vm1")
        return found

    target = LauncherTarget(get_vmi, node="node01", pods_dir=launcher)
    assert await target.command("ns1", "vm1", Method.PAUSE) == {"state": "Paused"}


async def test_launcher_errors_come_back_typed(launcher: Path) -> None:
    """A launcher's error reply is raised as the wire's typed error with its code."""

    async def get_vmi(namespace: str, name: str) -> VirtualMachineInstance:
        return with_pods({POD: "node01"})

    target = LauncherTarget(get_vmi, node="node01", pods_dir=launcher)
    with pytest.raises(CommandFailed) as info:
        await target.command("ns1", "vm1", Method.GET_GUEST_INFO)
    assert info.value.code == ErrorCode.AGENT_NOT_CONNECTED


async def test_console_socket_is_in_the_private_empty_dir(launcher: Path) -> None:
    """The console is <pods>/<uid>/volumes/kubernetes.io~empty-dir/private/libvirt/run/kvpy/."""

    async def get_vmi(namespace: str, name: str) -> VirtualMachineInstance:
        return with_pods({POD: "node01"})

    target = LauncherTarget(get_vmi, node="node01", pods_dir=launcher)
    path = await target.console_socket("ns1", "vm1")
    assert path == volumes(launcher, POD) / "private/libvirt/run/kvpy/console.sock"
    assert path == volumes(launcher, POD) / CONSOLE_SOCKET


@pytest.mark.parametrize(
    ("found", "why"),
    [
        pytest.param(None, "not found", id="vmi-missing"),
        pytest.param(with_pods({POD: "node02"}, node="node02"), "runs on", id="other-node"),
        pytest.param(with_pods({}), "no ready launcher", id="no-pods"),
        pytest.param(with_pods({OTHER_POD: "node01"}), "no ready launcher", id="socket-missing"),
    ],
)
async def test_vmi_not_here(launcher: Path, found: VirtualMachineInstance | None, why: str) -> None:
    """A VMI missing, elsewhere, or without a launcher socket here is NotOnThisNode."""

    async def get_vmi(namespace: str, name: str) -> VirtualMachineInstance:
        if found is None:
            raise NotFound(404, "NotFound", "vm1")
        return found

    target = LauncherTarget(get_vmi, node="node01", pods_dir=launcher)
    with pytest.raises(NotOnThisNode, match=why):
        await target.command("ns1", "vm1", Method.PAUSE)
