"""One wiring's namespace changes in one nsenter: the commands and the batch script."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from handler.netns import WiringError, batch_argv
from handler.netwire import Target, masquerade_commands
from shared.podnet import Binding

EMPTY_POD = {"eth0": {"ifname": "eth0", "mtu": 1450}}


def test_masquerade_makes_bridge_and_tap_in_a_fresh_namespace() -> None:
    """A fresh pod: the bridge (gateway MAC, the pod's MTU), the launcher user's tap
    (multi-queue when asked) on it, and the guest range's gateway address."""
    target = Target(index=0, name="default", binding=Binding.MASQUERADE, multi_queue=True)
    cmds = masquerade_commands(EMPTY_POD, uid=107, target=target)
    assert cmds[0] == ["link", "add", "k6t-eth0", "type", "bridge"]
    assert ["link", "set", "k6t-eth0", "mtu", "1450", "up"] in cmds
    tuntap = next(c for c in cmds if c[0] == "tuntap")
    assert tuntap[tuntap.index("user") + 1] == "107"
    assert tuntap[-1] == "multi_queue"
    assert ["link", "set", "tap0", "mtu", "1450", "master", "k6t-eth0", "up"] in cmds
    assert cmds[-1] == ["addr", "replace", "10.0.2.1/24", "dev", "k6t-eth0"]


def test_masquerade_again_adds_nothing_that_exists() -> None:
    """Bridge and tap already there (a handler that restarted mid-wiring): no `add`."""
    links = {**EMPTY_POD, "k6t-eth0": {}, "tap0": {}}
    target = Target(index=0, name="default", binding=Binding.MASQUERADE)
    cmds = masquerade_commands(links, uid=107, target=target)
    assert not [c for c in cmds if "add" in c[:2]]


def test_masquerade_without_the_pod_interface_is_an_error() -> None:
    """No eth0 in the pod: a WiringError naming it, before anything changes."""
    target = Target(index=0, name="default", binding=Binding.MASQUERADE)
    with pytest.raises(WiringError, match="eth0"):
        masquerade_commands({}, uid=107, target=target)


def test_the_batch_script_feeds_ip_and_nft_their_texts(tmp_path: Path) -> None:
    """The script pipes the ip lines to `ip -batch -` and the ruleset to `nft -f -` (here
    stand-ins on PATH that record what they got); texts are arguments, never code."""
    for tool in ("ip", "nft"):
        script = tmp_path / tool
        script.write_text(
            f'#!/bin/sh\necho "$@" > {tmp_path}/{tool}.args\ncat > {tmp_path}/{tool}.in\n'
        )
        script.chmod(0o755)
    argv = batch_argv(
        ip=[["link", "add", "br0", "type", "bridge"], ["link", "set", "br0", "up"]],
        sysctls={},
        nft='table ip t {}\n# $(touch pwned) "quoted"\n',
    )
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    subprocess.run(argv, env=env, check=True, cwd=tmp_path, timeout=30)
    assert (tmp_path / "ip.args").read_text() == "-batch -\n"
    assert (tmp_path / "ip.in").read_text() == "link add br0 type bridge\nlink set br0 up\n"
    assert (tmp_path / "nft.in").read_text() == 'table ip t {}\n# $(touch pwned) "quoted"\n'
    assert not (tmp_path / "pwned").exists()


def test_a_failing_ip_stops_the_batch(tmp_path: Path) -> None:
    """`ip -batch` failing ends the script non-zero before the ruleset is applied."""
    (tmp_path / "ip").write_text(
        "#!/bin/sh\ncat >/dev/null\necho 'Command failed -:1' >&2\nexit 1\n"
    )
    (tmp_path / "nft").write_text(f"#!/bin/sh\ntouch {tmp_path}/nft.ran\n")
    for tool in ("ip", "nft"):
        (tmp_path / tool).chmod(0o755)
    argv = batch_argv(ip=[["link", "set", "nosuch", "up"]], sysctls={}, nft="table ip t {}\n")
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    assert "Command failed" in done.stderr
    assert not (tmp_path / "nft.ran").exists()


def test_sysctl_keys_become_proc_paths() -> None:
    """net.ipv4.ip_forward is written at /proc/sys/net/ipv4/ip_forward (the script's
    argument pairs after the two texts)."""
    argv = batch_argv(ip=[], sysctls={"net.ipv4.ip_forward": "1"}, nft="")
    assert argv[-2:] == ("net/ipv4/ip_forward", "1")
