"""Remote access to a real guest on real nodes, through the aggregated API → virt-controller →
virt-handler (mTLS) → the launcher's pod: VNC with virtctl-py and with KubeVirt's own virtctl
(`vnc --proxy-only`), reading the RFB handshake and a framebuffer update of the guest's VGA
display."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_story import REPO, _serial, _vmi, _wait
from tests.integration.subresources.test_upstream_virtctl import upstream_virtctl

pytestmark = pytest.mark.cluster
__all__ = ["upstream_virtctl"]  # the fixture, shared with the process-mode virtctl tests
IO_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def kubeconfig(real_cluster: Cluster) -> Path:
    return real_cluster.kubeconfig


def virtctl_py(kubeconfig: Path, ns: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "virtctl_py", "--kubeconfig", str(kubeconfig), "-n", ns, *args]


@contextlib.contextmanager
def proxy(argv: Sequence[str]) -> Iterator[int]:
    """Run a `vnc --proxy-only` (or port-forward) client; yields the port it printed."""
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            _, err = proc.communicate(timeout=IO_TIMEOUT)
            raise AssertionError(f"{argv[-3:]} printed no port (rc {proc.returncode}): {err}")
        yield int(json.loads(line)["port"])
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=IO_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, f"connection closed after {len(data)} of {n} bytes"
        data += chunk
    return data


def rfb_session(port: int) -> tuple[bytes, tuple[int, int], bytes]:
    """An RFB 3.8 client against 127.0.0.1:port, security None: the server's version line,
    the framebuffer size from ServerInit, and the header of the first FramebufferUpdate
    (whose raw pixels are read in full)."""
    with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT) as sock:
        version = _exactly(sock, 12)
        sock.sendall(b"RFB 003.008\n")
        (count,) = _exactly(sock, 1)
        assert count > 0, "the server refused the connection"
        types = _exactly(sock, count)
        assert 1 in types, f"security None not offered: {list(types)}"
        sock.sendall(b"\x01")
        assert _exactly(sock, 4) == b"\0\0\0\0", "security handshake failed"
        sock.sendall(b"\x01")  # ClientInit: shared
        width, height = struct.unpack(">HH", _exactly(sock, 4))
        pixel_format = _exactly(sock, 16)
        (name_len,) = struct.unpack(">I", _exactly(sock, 4))
        _exactly(sock, name_len)
        # FramebufferUpdateRequest, not incremental, the whole screen.
        sock.sendall(struct.pack(">BBHHHH", 3, 0, 0, 0, width, height))
        header = _exactly(sock, 4)
        assert header[0] == 0, f"expected a FramebufferUpdate, got message type {header[0]}"
        (rects,) = struct.unpack(">H", header[2:])
        assert rects >= 1
        _, _, w, h, encoding = struct.unpack(">HHHHi", _exactly(sock, 12))
        assert encoding == 0, f"raw encoding expected (none was negotiated), got {encoding}"
        _exactly(sock, w * h * pixel_format[0] // 8)
        return version, (width, height), header


def test_vnc_through_virtctl_py_and_kubevirt_virtctl(
    guest: dict[str, Any], kubeconfig: Path, upstream_virtctl: Path
) -> None:
    """`vnc --proxy-only` prints {"port": N}; a VNC client there gets QEMU's RFB greeting,
    a non-empty framebuffer and a FramebufferUpdate of the guest's display, with virtctl-py
    and with KubeVirt's own virtctl alike."""
    ns, name = guest["metadata"]["namespace"], guest["metadata"]["name"]
    upstream = [str(upstream_virtctl), "--kubeconfig", str(kubeconfig), "-n", ns]
    for argv in (
        virtctl_py(kubeconfig, ns, "vnc", name, "--proxy-only"),
        [*upstream, "vnc", name, "--proxy-only"],
    ):
        with proxy(argv) as port:
            version, size, _ = rfb_session(port)
        assert version.startswith(b"RFB 003.00"), version
        assert size[0] > 0 and size[1] > 0, size


def test_vnc_of_a_missing_vmi_is_a_clear_error(guest: dict[str, Any], kubeconfig: Path) -> None:
    """No such VMI: virtctl-py exits non-zero naming it, before listening anywhere."""
    ns = guest["metadata"]["namespace"]
    ran = subprocess.run(
        virtctl_py(kubeconfig, ns, "vnc", "no-such-vmi", "--proxy-only"),
        capture_output=True, text=True, timeout=120, cwd=REPO, check=False,
    )  # fmt: skip
    assert ran.returncode != 0
    assert "no-such-vmi" in ran.stderr and ran.stdout == ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def ssh_key(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A fresh ed25519 key pair: (private key path, public key line)."""
    key = tmp_path_factory.mktemp("ssh") / "id_ed25519"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=60
    )
    return key, key.with_suffix(".pub").read_text().strip()


@pytest.fixture(scope="module")
def guest_namespace(real_stack: Kubectl) -> Iterator[str]:
    """One namespace (and one guest) for the module: a boot costs minutes of TCG here."""
    ns = f"t-remote-{uuid.uuid4().hex[:6]}"
    real_stack("create", "namespace", ns)
    yield ns
    real_stack("delete", "vm", "--all", "-n", ns, "--wait=true", "--timeout=120s", check=False)
    real_stack("delete", "namespace", ns, "--wait=false", check=False)


@pytest.fixture(scope="module")
def guest(
    real_stack: Kubectl, real_cluster: Cluster, guest_namespace: str, ssh_key: tuple[Path, str]
) -> dict[str, Any]:
    """The demo VM with the key in its user data and port 80 listed on its masquerade
    interface, Running with its TCP services up."""
    k, ns = real_stack, guest_namespace
    vm = yaml.safe_load((REPO / "examples" / "vm-demo.yaml").read_text())
    vm["metadata"]["namespace"] = ns
    spec = vm["spec"]["template"]["spec"]
    spec["domain"]["devices"]["interfaces"][0]["ports"] = [{"name": "http", "port": 80}]
    spec["volumes"][1]["cloudInitNoCloud"]["userData"] = (
        f"#cloud-config\nssh_authorized_keys:\n  - {ssh_key[1]}\n"
    )
    k("apply", "-f", "-", stdin=json.dumps(vm))
    vmi = _wait(lambda: (v := _vmi(k, ns)).get("status", {}).get("phase") == "Running" and v,
                300, "VMI Running", lambda: _vmi(k, ns).get("status"))  # fmt: skip
    _wait(lambda: "KUBEVIRT-PY-SERVICES-UP" in _serial(real_cluster, vmi), 240,
          "the guest's services", lambda: _serial(real_cluster, vmi)[-800:])  # fmt: skip
    up: dict[str, Any] = vmi
    return up


@contextlib.contextmanager
def forwarding(argv: Sequence[str], port: int) -> Iterator[None]:
    """Run a port-forward client until it listens on 127.0.0.1:port."""
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
    )
    try:

        def listening() -> bool:
            assert proc.poll() is None, f"port-forward exited: {proc.communicate()[1]}"
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        _wait(listening, 60, f"port-forward listening on {port}", interval=0.2)
        yield
    finally:
        _stop(proc)


def _http_get(port: int) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT) as s:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    return data.decode(errors="replace")


def _echo(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT) as s:
        s.sendall(payload)
        return _exactly(s, len(payload))


def test_port_forward_ssh_and_scp(
    guest: dict[str, Any], kubeconfig: Path, upstream_virtctl: Path,
    ssh_key: tuple[Path, str], tmp_path: Path, real_stack: Kubectl,
) -> None:  # fmt: skip
    """port-forward reaches the guest's HTTP server (a listed port) and TCP echo (an unlisted
    one) with virtctl-py and with KubeVirt's virtctl; virtctl-py ssh runs a command in the
    guest and scp copies a file in, through the system's OpenSSH client and dropbear."""
    ns, name = guest["metadata"]["namespace"], guest["metadata"]["name"]
    http, echo = _free_port(), _free_port()
    with forwarding(virtctl_py(kubeconfig, ns, "port-forward", f"vmi/{name}", f"{http}:80"), http):
        assert "KUBEVIRT-PY-HTTP-OK" in _http_get(http)
    upstream = [str(upstream_virtctl), "--kubeconfig", str(kubeconfig), "-n", ns]
    with forwarding([*upstream, "port-forward", f"vmi/{name}", f"{echo}:7"], echo):
        assert _echo(echo, b"kubevirt-py\n") == b"kubevirt-py\n"

    key = str(ssh_key[0])
    opts = ["-i", key, "-t", "-o StrictHostKeyChecking=no", "-t", "-o UserKnownHostsFile=/dev/null"]
    ran = subprocess.run(
        virtctl_py(kubeconfig, ns, "ssh", f"root@vmi/{name}", *opts, "-c", "echo SSH-OK $(hostname)"),
        capture_output=True, text=True, timeout=180, cwd=REPO, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert f"SSH-OK {name}" in ran.stdout

    local = tmp_path / "payload.txt"
    local.write_text("copied by virtctl-py scp\n")
    copied = subprocess.run(
        virtctl_py(kubeconfig, ns, "scp", *opts, str(local), f"root@vmi/{name}:/tmp/payload.txt"),
        capture_output=True, text=True, timeout=180, cwd=REPO, check=False,
    )  # fmt: skip
    assert copied.returncode == 0, copied.stderr
    shown = subprocess.run(
        virtctl_py(kubeconfig, ns, "ssh", f"root@vmi/{name}", *opts, "-c", "cat /tmp/payload.txt"),
        capture_output=True, text=True, timeout=180, cwd=REPO, check=False,
    )  # fmt: skip
    assert shown.stdout == "copied by virtctl-py scp\n", shown.stderr


def test_port_forward_bad_input(
    guest: dict[str, Any], kubeconfig: Path, real_stack: Kubectl
) -> None:
    """A port out of range is refused by virtctl-py naming it (the API's 400 is unit-tested);
    a guest port nothing listens on is a clear error; the VMI keeps running through it all."""
    ns, name = guest["metadata"]["namespace"], guest["metadata"]["name"]
    bad = subprocess.run(
        virtctl_py(kubeconfig, ns, "port-forward", f"vmi/{name}", "8080:70000"),
        capture_output=True, text=True, timeout=60, cwd=REPO, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "70000" in bad.stderr, bad.stderr
    closed = subprocess.Popen(
        virtctl_py(kubeconfig, ns, "port-forward", "--stdio", f"vmi/{name}", "23"),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    try:
        closed.wait(timeout=120)  # stdin stays open: only the guest side can end it
    finally:
        if closed.poll() is None:
            closed.kill()
            closed.wait()
    assert closed.stderr is not None
    err = closed.stderr.read()
    assert closed.returncode != 0 and "guest port 23" in err, err
    assert _vmi(real_stack, ns)["status"]["phase"] == "Running"
