"""KubeVirt's own virtctl (v1.8.2, built from Go modules by scripts/build-virtctl) against
kubevirt-py's subresource API: start, stop, restart, pause, unpause, guestosinfo, vnc
--proxy-only, port-forward (beside virtctl-py's), reset, expand, memory-dump (refused: not
supported), and freeze/unfreeze through kube-apiserver.

The binary is built when missing (minutes, once; cached outside the repo): a build failure
fails these tests rather than skipping them. No VM controller or launcher runs here: the
VM verbs are checked by the object writes the API makes, the VMI actions by the commands
the handler side received.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from shared.wire.launcher_api import Method
from tests.integration.subresources.conftest import Kubectl, Ran
from tests.integration.subresources.stack import (
    CONSOLE_GREETING,
    GUEST_INFO,
    REPO,
    RUNNING_VMI,
    VNC_GREETING,
    Stack,
)
from tests.integration.subresources.test_vm_verbs import get, make_running_vmi, make_vm


@pytest.fixture(scope="module")
def upstream_virtctl() -> Path:
    """The path of KubeVirt's virtctl, built if needed."""
    built = subprocess.run(
        [str(REPO / "scripts" / "build-virtctl")],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    assert built.returncode == 0, f"scripts/build-virtctl failed:\n{built.stderr[-3000:]}"
    return Path(built.stdout.strip().splitlines()[-1])


async def run(binary: Path, stack: Stack, *args: str) -> Ran:
    proc = await asyncio.create_subprocess_exec(
        str(binary), "--kubeconfig", str(stack.config.cluster.kubeconfig),
        "-n", stack.config.namespace, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        async with asyncio.timeout(60):
            out, err = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return Ran(proc.returncode, out.decode(), err.decode())


async def test_vm_verbs(
    upstream_virtctl: Path, stack: Stack, kubectl: Kubectl, tmp_path: Path
) -> None:
    """virtctl start / stop / restart: 202s from our API, the writes KubeVirt makes, and
    virtctl's own refusal text for a 409."""
    ns, name = stack.config.namespace, "vm-upstream"
    await make_vm(kubectl, ns, name, "Halted")

    started = await run(upstream_virtctl, stack, "start", name)
    assert started.code == 0, started.stderr
    assert f"VM {name} was scheduled to start" in started.stdout
    assert (await get(kubectl, ns, "vm", name))["spec"]["runStrategy"] == "Always"

    uid = await make_running_vmi(kubectl, ns, name, tmp_path)
    again = await run(upstream_virtctl, stack, "start", name)
    assert again.code != 0
    assert "VM is already running" in again.stderr

    restarted = await run(upstream_virtctl, stack, "restart", name)
    assert restarted.code == 0, restarted.stderr
    vm = await get(kubectl, ns, "vm", name)
    assert vm["status"]["stateChangeRequests"] == [
        {"action": "Stop", "uid": uid},
        {"action": "Start"},
    ]

    stopped = await run(upstream_virtctl, stack, "stop", name)
    assert stopped.code == 0, stopped.stderr
    assert (await get(kubectl, ns, "vm", name))["spec"]["runStrategy"] == "Halted"


async def test_vmi_actions(upstream_virtctl: Path, stack: Stack) -> None:
    """virtctl pause / unpause vmi reach the handler; guestosinfo prints the agent's JSON."""
    ns = stack.config.namespace
    for verb, method in (("pause", Method.PAUSE), ("unpause", Method.UNPAUSE)):
        ran = await run(upstream_virtctl, stack, verb, "vmi", RUNNING_VMI)
        assert ran.code == 0, ran.stderr
        assert (ns, RUNNING_VMI, method) in stack.target.commands
    info = await run(upstream_virtctl, stack, "guestosinfo", RUNNING_VMI)
    assert info.code == 0, info.stderr
    shown = json.loads(info.stdout)
    assert shown["hostname"] == GUEST_INFO["hostname"]
    assert shown["os"]["name"] == "Debian GNU/Linux"


def _connection(stack: Stack) -> list[str]:
    return ["--kubeconfig", str(stack.config.cluster.kubeconfig), "-n", stack.config.namespace]


async def _proxy_port(proc: asyncio.subprocess.Process) -> int:
    assert proc.stdout is not None
    async with asyncio.timeout(60):
        line = await proc.stdout.readline()
    assert line, f"no port printed: {(await proc.communicate())[1].decode()[-2000:]}"
    port: int = json.loads(line)["port"]
    return port


async def _stopped(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.terminate()
    async with asyncio.timeout(30):
        await proc.wait()


async def test_vnc_proxy_only(upstream_virtctl: Path, stack: Stack) -> None:
    """virtctl vnc --proxy-only (KubeVirt's and ours) prints {"port": N}; a client there
    talks to the VMI's VNC socket through kube-apiserver, the API and the handler."""
    config = _connection(stack)
    for argv in (
        [str(upstream_virtctl), *config, "vnc", RUNNING_VMI, "--proxy-only"],
        [sys.executable, "-m", "virtctl_py", *config, "vnc", RUNNING_VMI, "--proxy-only"],
    ):
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=REPO
        )
        try:
            port = await _proxy_port(proc)
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            async with asyncio.timeout(30):
                assert await reader.readexactly(len(VNC_GREETING)) == VNC_GREETING
                writer.write(b"rfb")
                assert await reader.readexactly(3) == b"RFB"
            writer.close()
        finally:
            await _stopped(proc)


async def test_port_forward(upstream_virtctl: Path, stack: Stack) -> None:
    """virtctl port-forward vmi/NAME LOCAL:REMOTE (KubeVirt's and ours): each connection
    is tunnelled to the guest port the handler was asked to forward."""
    config = _connection(stack)
    for binary in ([str(upstream_virtctl)], [sys.executable, "-m", "virtctl_py"]):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            local = s.getsockname()[1]
        argv = [*binary, *config, "port-forward", f"vmi/{RUNNING_VMI}", f"{local}:2222"]
        proc = await asyncio.create_subprocess_exec(*argv, stderr=asyncio.subprocess.PIPE, cwd=REPO)
        try:
            reader, writer = await _connect_when_listening(local)
            async with asyncio.timeout(30):
                assert await reader.readexactly(len(CONSOLE_GREETING)) == CONSOLE_GREETING
                writer.write(b"ping")
                assert await reader.readexactly(4) == b"PING"
            writer.close()
        finally:
            await _stopped(proc)
        assert stack.target.forwarded[-1] == 2222


async def _connect_when_listening(
    port: int,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    async with asyncio.timeout(60):
        while True:
            try:
                return await asyncio.open_connection("127.0.0.1", port)
            except ConnectionRefusedError:
                await asyncio.sleep(0.2)


async def test_reset_expand_memory_dump_and_freeze(
    upstream_virtctl: Path, stack: Stack, kubectl: Kubectl, tmp_path: Path
) -> None:
    """virtctl reset reaches the handler; virtctl expand --vm and --file print the VM (no
    instancetype: unchanged, the matcher-free spec); virtctl memory-dump of the stopped VM is refused
    with KubeVirt's reason (VMI is not running; dumps themselves: realnodes);
    freeze/unfreeze (virtctl has no verb for them: virt-freezer and backup tools call the
    API) through kube-apiserver with KubeVirt's body reach the handler with the timeout."""
    ns, name = stack.config.namespace, "vm-expand"
    reset = await run(upstream_virtctl, stack, "reset", RUNNING_VMI)
    assert reset.code == 0, reset.stderr
    assert (ns, RUNNING_VMI, Method.RESET) in stack.target.commands

    await make_vm(kubectl, ns, name, "Halted")
    expanded = await run(upstream_virtctl, stack, "expand", "--vm", name, "--output", "json")
    assert expanded.code == 0, expanded.stderr
    shown = json.loads(expanded.stdout)
    assert (shown["metadata"]["name"], shown["spec"]["runStrategy"]) == (name, "Halted")
    vm_file = tmp_path / "vm.json"
    vm_file.write_text(json.dumps({k: shown[k] for k in ("apiVersion", "kind", "spec")}
                                  | {"metadata": {"name": "from-file"}}))  # fmt: skip
    from_file = await run(upstream_virtctl, stack, "expand", "--file", str(vm_file), "-o", "json")
    assert from_file.code == 0, from_file.stderr
    assert json.loads(from_file.stdout)["metadata"]["name"] == "from-file"

    dump = await run(upstream_virtctl, stack, "memory-dump", "get", name, "--claim-name", "x")
    assert dump.code != 0 and "VMI is not running" in dump.stderr, dump

    path = f"/apis/subresources.kubevirt.io/v1/namespaces/{ns}/virtualmachineinstances"
    body = tmp_path / "freeze.json"
    body.write_text(json.dumps({"unfreezeTimeout": "2m0s"}))
    frozen = await kubectl("replace", "--raw", f"{path}/{RUNNING_VMI}/freeze", "-f", str(body))
    assert frozen.code == 0, frozen.stderr
    i = stack.target.commands.index((ns, RUNNING_VMI, Method.FREEZE))
    assert stack.target.args[i] == {"unfreezeTimeoutSeconds": 120.0}
    body.write_text("{}")
    thawed = await kubectl("replace", "--raw", f"{path}/{RUNNING_VMI}/unfreeze", "-f", str(body))
    assert thawed.code == 0, thawed.stderr
    assert (ns, RUNNING_VMI, Method.UNFREEZE) in stack.target.commands
