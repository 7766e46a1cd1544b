"""virtctl-py's remote-access verbs without a cluster: how port-forward reads its targets and
ports, and the ssh/scp command lines it hands to the system's OpenSSH client."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path

import aiohttp
import pytest

from virtctl_py import cli
from virtctl_py.errors import CliError, Exit
from virtctl_py.session import Target
from virtctl_py.ssh import Remote, SshOptions, scp_argv, ssh_argv
from virtctl_py.streams import ForwardTarget, Listen, PortMapping, _serve_once, port_mapping

TARGET = Target(kubeconfig=Path("/k/config"), context="ctx", namespace="ns1")


def test_forward_targets_read_like_kubevirts() -> None:
    """vmi/NAME, vm/NAME and NAME.NAMESPACE forms; anything else names the expected form."""
    assert ForwardTarget.parse("vmi/demo") == ForwardTarget(resource="vmi", name="demo")
    assert ForwardTarget.parse("vm/demo.prod") == ForwardTarget(
        resource="vm", name="demo", namespace="prod"
    )
    for bad in ("demo", "pod/demo", "vmi/"):
        with pytest.raises(CliError, match="vmi/NAME"):
            ForwardTarget.parse(bad)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("8080:80", PortMapping(local=8080, remote=80)),
        ("22", PortMapping(local=22, remote=22)),
        ("tcp/2222:22", PortMapping(local=2222, remote=22)),
        ("0:80", PortMapping(local=0, remote=80)),
    ],
)
def test_port_mappings(text: str, want: PortMapping) -> None:
    """[tcp/]LOCAL:REMOTE or one port for both; local 0 is any free port."""
    assert port_mapping(text) == want


@pytest.mark.parametrize("text", ["8080:70000", "x:80", "0", "udp/53", "8080:-1"])
def test_bad_port_mappings_are_usage_errors(text: str) -> None:
    """Out of range, not a number, or udp: a usage error naming the input."""
    with pytest.raises(CliError) as info:
        port_mapping(text)
    assert info.value.code is Exit.USAGE


def test_ssh_tunnels_through_port_forward_stdio() -> None:
    """ssh's ProxyCommand is this virtctl-py's port-forward --stdio, connected the same way,
    to the guest's ssh port; user@ and the local ssh options pass through."""
    opts = SshOptions(port=2222, identity="/k/id", ssh_opts=("-o StrictHostKeyChecking=no",))
    argv = ssh_argv(TARGET, Remote.parse("root@vmi/demo"), opts, ["uname", "-a"])
    assert argv[0] == "ssh" and argv[-3:] == ["root@vmi-demo.ns1", "uname", "-a"]
    proxy = shlex.split(argv[argv.index("-o") + 1].removeprefix("ProxyCommand="))
    assert proxy[1:3] == ["-m", "virtctl_py"]
    assert proxy[3:] == [
        "--kubeconfig", "/k/config", "--context", "ctx", "-n", "ns1",
        "port-forward", "--stdio", "vmi/demo", "2222",
    ]  # fmt: skip
    assert argv[3:5] == ["-i", "/k/id"] and "StrictHostKeyChecking=no" in argv


def test_scp_rewrites_the_guest_side_only() -> None:
    """`[user@]vmi/NAME.NS:PATH` becomes the tunnelled host; local paths stay as given."""
    argv = scp_argv(
        TARGET, ["./a.txt"], "root@vmi/demo.prod:/tmp/a.txt", SshOptions(), recursive=True
    )
    assert argv[:2] == ["scp", "-r"]
    assert argv[-2:] == ["./a.txt", "root@vmi-demo.prod:/tmp/a.txt"]
    assert "-n prod port-forward --stdio vmi/demo 22" in argv[3]
    with pytest.raises(CliError, match="name the guest once"):
        scp_argv(TARGET, ["a"], "b", SshOptions(), recursive=False)


def test_the_verbs_parse_upstream_flags() -> None:
    """vnc --proxy-only --port, port-forward --stdio, ssh -i -l -p -t -c, scp -r."""
    p = cli.build()
    args = p.parse_args(["vnc", "demo", "--proxy-only", "--port", "5901", "-n", "x"])
    assert (args.proxy_only, args.port, args.namespace) == (True, 5901, "x")
    args = p.parse_args(["port-forward", "--stdio", "vmi/demo", "22"])
    assert (args.stdio, args.target, args.ports) == (True, "vmi/demo", ["22"])
    argv = ["ssh", "vmi/demo", "-l", "root", "-i", "k", "-t", "-o LogLevel=ERROR", "-c", "id"]
    args = p.parse_args(argv)
    assert args.command == "ssh"  # -c is the remote command, not the verb
    assert (args.username, args.identity_file, args.local_ssh_opts, args.remote_command) == (
        "root", "k", ["-o LogLevel=ERROR"], "id",
    )  # fmt: skip
    args = p.parse_args(["scp", "-r", "a", "vmi/demo:/b"])
    assert (args.recursive, args.paths) == (True, ["a", "vmi/demo:/b"])


class FakeWs:
    """A websocket that greets like a VNC server, records what it is sent, then closes."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[aiohttp.WSMessage] = asyncio.Queue()
        self.inbox.put_nowait(aiohttp.WSMessage(aiohttp.WSMsgType.BINARY, b"RFB 003.008\n", None))
        self.sent: list[bytes] = []

    async def receive(self, timeout: float | None = None) -> aiohttp.WSMessage:
        return await self.inbox.get()

    async def send_bytes(self, data: bytes, compress: int | None = None) -> None:
        self.sent.append(data)
        self.inbox.put_nowait(aiohttp.WSMessage(aiohttp.WSMsgType.CLOSE, None, None))


async def test_vnc_proxy_serves_one_client_on_the_port_it_reports() -> None:
    """The local listener reports its port, bridges its first client to the websocket both
    ways, and ends when the VNC side closes."""
    ws = FakeWs()
    ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    served = asyncio.create_task(_serve_once(ws, ready, Listen()))  # type: ignore[arg-type]
    port = await asyncio.wait_for(ready, 10)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    assert await asyncio.wait_for(reader.readexactly(12), 10) == b"RFB 003.008\n"
    writer.write(b"RFB 003.008\n")
    await writer.drain()
    assert await asyncio.wait_for(served, 10) == "vnc closed"
    assert ws.sent == [b"RFB 003.008\n"]
    writer.close()
