"""KubeVirt's own virtctl (v1.8.2, built by scripts/build-virtctl) driving one real guest on
real nodes through kubevirt-py's subresource API: start, pause/unpause, guestosinfo,
console, migrate, addvolume/removevolume, restart and stop, each checked by what the
cluster and the guest show afterwards (vnc --proxy-only and port-forward are
test_remote_access.py)."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_remote_access import _stop
from tests.integration.realnodes.test_storage import _apply, _claim, _get, _running
from tests.integration.realnodes.test_story import REPO, _condition, _serial, _virtctl, _wait
from tests.integration.subresources.test_upstream_virtctl import upstream_virtctl

pytestmark = pytest.mark.cluster
__all__ = ["upstream_virtctl"]  # the fixture, shared with the process-mode virtctl tests
NAME = "demo"
TICK = b"KUBEVIRT-PY-TICK "


def _upstream(binary: Path, kubeconfig: Path, ns: str, *args: str) -> str:
    """Run KubeVirt's virtctl; its stdout, once it exited 0."""
    argv = [str(binary), "--kubeconfig", str(kubeconfig), "-n", ns, *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, cwd=REPO, check=False)
    assert done.returncode == 0, f"virtctl {' '.join(args)} exited {done.returncode}: {done.stderr}"
    return done.stdout


def _console_until(argv: list[str], marker: bytes, timeout: float) -> bytes:
    """Run `virtctl console` on a pseudo-terminal (it wants one) and read what it prints
    until `marker`; then stop it."""
    master, slave = os.openpty()
    proc = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, cwd=REPO, start_new_session=True
    )
    os.close(slave)
    seen, deadline = b"", time.monotonic() + timeout
    try:
        while marker not in seen:
            left = deadline - time.monotonic()
            assert left > 0, f"no {marker!r} on the console within {timeout}s: {seen[-800:]!r}"
            if not select.select([master], [], [], min(left, 1.0))[0]:
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's other side closed
                chunk = b""
            assert chunk, f"console ended (rc {proc.poll()}): {seen[-800:]!r}"
            seen += chunk
    finally:
        _stop(proc)  # type: ignore[arg-type]
        os.close(master)
    return seen


def _vm() -> dict[str, Any]:
    """The demo VM, Halted, stopping at once (no grace period to wait out)."""
    vm: dict[str, Any] = yaml.safe_load((REPO / "examples" / "vm-demo.yaml").read_text())
    vm["spec"]["runStrategy"] = "Halted"
    vm["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 0
    return vm


def _console_has(cluster: Cluster, vmi: dict[str, Any], pattern: str) -> str:
    found: str = _wait(
        lambda: (m := re.search(pattern, _serial(cluster, vmi), re.M)) and m.group(0),
        180, repr(pattern), lambda: _serial(cluster, vmi)[-800:],
    )  # fmt: skip
    return found


def _migrated(k: Kubectl, ns: str, source: str) -> dict[str, Any]:
    """The one VMIM Succeeded; the VMI Running on a node other than `source`."""

    def vmims() -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads(k("get", "vmim", "-n", ns, "-o", "json"))["items"]
        return items

    def phases() -> list[str]:
        return [str(m.get("status", {}).get("phase")) for m in vmims()]

    def diagnosis() -> str:
        """The phases, the VMI's migrationState and each handler's and launcher's last
        migration log lines: what a migration stuck in Running was doing."""
        state = _get(k, ns, "vmi", NAME).get("status", {}).get("migrationState")
        lines = [f"phases {phases()}", f"migrationState {json.dumps(state)}"]
        for where, selector in (
            ("kubevirt", "kubevirt.io=virt-handler"),
            (ns, "kubevirt.io=virt-launcher"),
        ):
            logs = k("logs", "-n", where, "-l", selector, "--all-containers", "--prefix",
                     "--tail", "400", check=False)  # fmt: skip
            lines += [ln[:400] for ln in str(logs).splitlines() if "migrat" in ln][-40:]
        return "\n".join(lines)

    _wait(lambda: phases() == ["Succeeded"], 300, "the VMIM Succeeded", diagnosis)
    moved: dict[str, Any] = _wait(
        lambda: (v := _get(k, ns, "vmi", NAME)).get("status", {}).get("nodeName")
        not in (None, source) and v.get("status", {}).get("phase") == "Running" and v,
        120, "the VMI Running on the other node", lambda: _get(k, ns, "vmi", NAME).get("status"),
    )  # fmt: skip
    return moved


def _volume_phase(k: Kubectl, ns: str, volume: str) -> str | None:
    found = _get(k, ns, "vmi", NAME).get("status", {}).get("volumeStatus", [])
    return next((str(v.get("phase")) for v in found if v["name"] == volume), None)


def _refused(binary: Path, kubeconfig: Path, ns: str, *args: str) -> str:
    """Run KubeVirt's virtctl, which must fail; what it printed on stderr."""
    argv = [str(binary), "--kubeconfig", str(kubeconfig), "-n", ns, *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
    assert done.returncode != 0, f"virtctl {' '.join(args)} succeeded: {done.stdout}"
    return done.stderr


def _dump_request(k: Kubectl, ns: str) -> dict[str, Any]:
    return dict(_get(k, ns, "vm", NAME).get("status", {}).get("memoryDumpRequest") or {})


def _memory_dump(k: Kubectl, ns: str, virtctl: Any, refused: Any, tmp: Path) -> None:
    """A claim too small is refused naming the sizes; `memory-dump get --create-claim
    --output --port-forward` makes the claim, dumps, exports the claim and downloads its
    tar.gz: one `<vm>-<claim>-<time>.memory.dump`, an ELF core (ET_CORE) at least the
    guest's 128 MiB; the request Completed naming that file, the claim annotated with it,
    the volume gone from the VMI; `virtctl-py memory-dump remove` drops the request."""
    small = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "tiny"},
             "spec": {"accessModes": ["ReadWriteOnce"],
                      "resources": {"requests": {"storage": "16Mi"}}}}  # fmt: skip
    _apply(k, ns, small)
    why = refused("memory-dump", "get", NAME, "--claim-name=tiny")
    assert "pvc size [16Mi] should be bigger then" in why, why
    out = tmp / "dump.tar.gz"
    virtctl("memory-dump", "get", NAME, "--claim-name=dump", "--create-claim",
            f"--output={out}", "--port-forward")  # fmt: skip
    with tarfile.open(out, "r:gz") as tar:
        (member,) = tar.getmembers()
        head = tar.extractfile(member).read(18)  # type: ignore[union-attr]
    assert re.fullmatch(rf"{NAME}-dump-\d{{8}}-\d{{6}}\.memory\.dump", member.name), member.name
    assert head[:4] == b"\x7fELF" and int.from_bytes(head[16:18], "little") == 4, head  # ET_CORE
    assert member.size >= 128 * 1024 * 1024, member.size
    request = _dump_request(k, ns)
    assert (request["phase"], request["fileName"]) == ("Completed", member.name), request
    assert request["startTimestamp"] and request["endTimestamp"], request
    notes = _get(k, ns, "pvc", "dump")["metadata"]["annotations"]
    assert notes["kubevirt.io/memory-dump"] == member.name, notes
    assert _volume_phase(k, ns, "dump") is None
    done = _virtctl(k.kubeconfig, ns, "memory-dump", "remove", NAME)
    assert done.returncode == 0, done.stderr
    _wait(lambda: not _dump_request(k, ns), 60, "the memory dump request removed",
          lambda: _dump_request(k, ns))  # fmt: skip


def test_kubevirt_virtctl_drives_a_guest_on_real_nodes(
    real_stack: Kubectl,
    real_cluster: Cluster,
    real_namespace: str,
    upstream_virtctl: Path,
    tmp_path: Path,
) -> None:
    """With KubeVirt's virtctl alone, each verb exiting 0: `start` runs the Halted demo VM;
    `pause vm`/`unpause vm` make the VMI's Paused condition appear and go; `guestosinfo`
    prints the guest agent's JSON (the guest's hostname); `console` (on a pty) shows the
    guest's serial output; `migrate` makes a VMIM that Succeeds with the VMI Running on the
    other node; `addvolume` of a hotpluggable claim makes it Ready and the guest sees the
    disk, `removevolume` makes it go from the VMI and the guest; `restart` gives a new VMI
    Running; `stop` leaves no VMI. Between them, a memory dump (_memory_dump)."""
    k, ns, kubeconfig = real_stack, real_namespace, real_cluster.kubeconfig

    def virtctl(*args: str) -> str:
        return _upstream(upstream_virtctl, kubeconfig, ns, *args)

    _apply(k, ns, _vm())
    assert "was scheduled to start" in virtctl("start", NAME)
    vmi = _running(k, ns, NAME)
    vmi = _wait(lambda: (v := _get(k, ns, "vmi", NAME)) and
                _condition(v, "AgentConnected") == "True" and v,
                300, "the guest agent connected", lambda: _get(k, ns, "vmi", NAME).get("status"))  # fmt: skip

    for verb, paused in (("pause", True), ("unpause", False)):
        virtctl(verb, "vm", NAME)
        _wait(lambda p=paused: (_condition(_get(k, ns, "vmi", NAME), "Paused") == "True") == p,  # type: ignore[misc]
              60, f"Paused condition after {verb}")  # fmt: skip

    info = json.loads(virtctl("guestosinfo", NAME))
    assert info["hostname"] == NAME and info["guestAgentVersion"], info

    console = [str(upstream_virtctl), "--kubeconfig", str(kubeconfig), "-n", ns,
               "console", NAME, "--timeout=1"]  # fmt: skip
    assert TICK in _console_until(console, TICK, 120)

    source = vmi["status"]["nodeName"]
    virtctl("migrate", NAME)
    vmi = _migrated(k, ns, source)
    _console_has(real_cluster, vmi, r"^KUBEVIRT-PY-TICK \d+")

    _apply(k, ns, _claim("hp-disk"))
    virtctl("addvolume", NAME, "--volume-name=hp-disk")
    _wait(lambda: _volume_phase(k, ns, "hp-disk") == "Ready", 180, "hp-disk Ready",
          lambda: _get(k, ns, "vmi", NAME).get("status", {}).get("volumeStatus"))  # fmt: skip
    added = _console_has(real_cluster, vmi, r"^KUBEVIRT-PY-HOTPLUG-ADDED \w+")
    disk = added.split()[-1]
    _console_has(real_cluster, vmi, rf"^KUBEVIRT-PY-DISK {disk} ro=0 found=0 wrote=1")
    virtctl("removevolume", NAME, "--volume-name=hp-disk")
    _wait(lambda: _volume_phase(k, ns, "hp-disk") is None, 180, "hp-disk gone from the VMI")
    _console_has(real_cluster, vmi, rf"^KUBEVIRT-PY-HOTPLUG-REMOVED {disk}$")

    def refused(*args: str) -> str:
        return _refused(upstream_virtctl, kubeconfig, ns, *args)

    _memory_dump(k, ns, virtctl, refused, tmp_path)

    virtctl("restart", NAME)
    again = _running(k, ns, NAME, not_uid=vmi["metadata"]["uid"])
    assert again["metadata"]["uid"] != vmi["metadata"]["uid"]

    virtctl("stop", NAME)
    _wait(lambda: not _get(k, ns, "vmi", NAME), 180, "no VMI after stop",
          lambda: _get(k, ns, "vmi", NAME).get("status"))  # fmt: skip
    assert _get(k, ns, "vm", NAME)["spec"]["runStrategy"] == "Halted"
