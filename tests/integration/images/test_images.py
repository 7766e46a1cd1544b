"""The images scripts/build-images makes start under Debian's containerd 1.6 and runc.

One private containerd (own root, state, sockets, runc root under the test's tmp dir)
imports every archive into the k8s.io namespace, as a node's would, and runs each image:
the daemons' entry points answer --help, the launcher image carries libvirt, QEMU, tini
and /bin/busybox, the pause binary runs, the containerDisk holds KubeVirt's layout.
buildah, containerd and runc are required: their absence fails these tests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from tests.integration.launcher.harness import BOOT_MARKER

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
REGISTRY = "registry.local/kubevirt-py"
DAEMONS = {
    "controller": "virt-controller-py",
    "handler": "virt-handler-py",
    "launcher": "virt-launcher-py",
}
CONFIG = """\
version = 2
root = "{root}/root"
state = "{root}/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "{root}/containerd.sock"
[ttrpc]
  address = "{root}/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
"""

# Runs in the launcher image: a private libvirtd (configured as the launcher configures its
# own) starts the guest copied out of the containerDisk under TCG; prints the serial console.
BOOT_SCRIPT = """
import os, subprocess, time, libvirt
from launcher.libvirtd import QEMU_CONF
os.makedirs("/run/lv/sock"); os.makedirs("/etc/libvirt", exist_ok=True)
open("/etc/libvirt/qemu.conf", "w").write(QEMU_CONF)
open("/run/lv/libvirtd.conf", "w").write('unix_sock_dir = "/run/lv/sock"\\n')
daemon = subprocess.Popen(["tini", "-s", "--", "libvirtd", "-f", "/run/lv/libvirtd.conf"],
                          stderr=open("/run/lv/libvirtd.log", "w"))
deadline = time.monotonic() + 30
while True:
    try:
        conn = libvirt.open("qemu+unix:///system?socket=/run/lv/sock/libvirt-sock")
        break
    except libvirt.libvirtError:
        assert time.monotonic() < deadline, open("/run/lv/libvirtd.log").read()[-2000:]
        time.sleep(0.1)
dom = conn.createXML(\"\"\"<domain type='qemu'><name>t</name><memory unit='MiB'>256</memory>
<os><type arch='x86_64' machine='q35'>hvm</type><kernel>/guest/vmlinuz</kernel>
<initrd>/guest/initrd.img</initrd><cmdline>console=ttyS0</cmdline></os><devices>
<disk type='file' device='disk'><driver name='qemu' type='qcow2'/>
<source file='/guest/disk.qcow2'/><target dev='vda' bus='virtio'/><readonly/></disk>
<serial type='file'><source path='/run/lv/console'/></serial></devices></domain>\"\"\")
deadline = time.monotonic() + 120
while MARKER not in open("/run/lv/console", errors="replace").read():
    assert time.monotonic() < deadline, "no boot marker on the console"
    time.sleep(0.2)
print(open("/run/lv/console", errors="replace").read())
dom.destroy()
daemon.terminate()
daemon.wait()
"""


@dataclass(frozen=True, slots=True)
class Containerd:
    root: Path
    ids: Iterator[int] = field(default_factory=count)

    def ctr(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        cmd = ["ctr", "--address", str(self.root / "containerd.sock"), "-n", "k8s.io", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

    def run(self, ref: str, *argv: str, mounts: tuple[str, ...] = ()) -> str:
        """Runs argv (replacing the image's entry point) to completion; returns its output."""
        name = f"kvimg-{os.getpid()}-{next(self.ids)}"
        opts = [f"--mount={m}" for m in mounts]
        # --cgroup "": runc's own /<name> cgroup, removed with the container (a shared
        # /k8s.io parent would outlive the test).
        private = ["--rm", f"--runc-root={self.root}/runc", "--cgroup", ""]
        done = self.ctr("run", *private, *opts, ref, name, *argv)
        assert done.returncode == 0, f"{ref} {argv}: {done.stdout}{done.stderr}"
        return done.stdout + done.stderr


def _entrypoint(archive: Path) -> list[str]:
    """The Entrypoint in the image config of an OCI archive."""
    with tarfile.open(archive) as tar:

        def load(name: str) -> Any:
            member = tar.extractfile(name)
            assert member is not None, name
            return json.load(member)

        def blob(digest: str) -> Any:
            return load("blobs/sha256/" + digest.removeprefix("sha256:"))

        manifest = blob(load("index.json")["manifests"][0]["digest"])
        return list(blob(manifest["config"]["digest"])["config"]["Entrypoint"])


@pytest.fixture(scope="module")
def archives() -> dict[str, Path]:
    """Builds the images (seconds when nothing changed) and parses the stdout contract."""
    for tool in ("buildah", "mmdebstrap"):
        assert shutil.which(tool), f"{tool} is missing: scripts/lib/common.sh KV_APT_PACKAGES"
    built = subprocess.run(
        [REPO / "scripts" / "build-images"], capture_output=True, text=True, timeout=1800
    )
    assert built.returncode == 0, built.stderr[-4000:]
    lines = [line.split(" ") for line in built.stdout.splitlines()]
    assert all(len(words) == 2 for words in lines), built.stdout
    return {ref: Path(path) for ref, path in lines}


@pytest.fixture(scope="module")
def containerd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Containerd]:
    for tool in ("containerd", "ctr", "runc"):
        assert shutil.which(tool), f"{tool} is missing: scripts/lib/common.sh KV_APT_PACKAGES"
    root = tmp_path_factory.mktemp("containerd")
    (root / "config.toml").write_text(CONFIG.format(root=root))
    with (root / "containerd.log").open("wb") as log:
        proc = subprocess.Popen(
            ["containerd", "--config", str(root / "config.toml")], stdout=log, stderr=log
        )
    instance = Containerd(root)
    try:
        deadline = time.monotonic() + 15
        while instance.ctr("version", timeout=5).returncode != 0:
            assert proc.poll() is None, (root / "containerd.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "containerd did not answer within 15 s"
            time.sleep(0.1)
        yield instance
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def imported(archives: dict[str, Path], containerd: Containerd) -> dict[str, Path]:
    for archive in archives.values():
        done = containerd.ctr("images", "import", str(archive), timeout=300)
        assert done.returncode == 0, done.stderr
    return archives


def test_build_prints_one_archive_per_image_and_print_agrees(archives: dict[str, Path]) -> None:
    """stdout names the five images, each with an absolute path to an existing archive, and
    --print (which builds nothing) prints exactly the same lines."""
    assert sorted(archives) == sorted(
        [f"{REGISTRY}/pause:3.10", f"{REGISTRY}/tiny-guest:v1"]
        + [f"{REGISTRY}/virt-{name}:dev" for name in DAEMONS]
    )
    assert all(path.is_absolute() and path.is_file() for path in archives.values())
    printed = subprocess.run(
        [REPO / "scripts" / "build-images", "--print"], capture_output=True, text=True, timeout=120
    )
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.splitlines() == [f"{ref} {path}" for ref, path in archives.items()]


def test_archives_import_under_their_references(
    imported: dict[str, Path], containerd: Containerd
) -> None:
    """`ctr images import` names each image by the reference build-images printed."""
    listed = containerd.ctr("images", "ls", "-q")
    assert set(imported) <= set(listed.stdout.split()), listed.stdout


@pytest.mark.parametrize("daemon", sorted(DAEMONS))
def test_daemon_entry_point_starts(
    imported: dict[str, Path], containerd: Containerd, daemon: str
) -> None:
    """Each daemon image's entry point is its console script, and it starts (--help)."""
    ref = f"{REGISTRY}/virt-{daemon}:dev"
    entrypoint = _entrypoint(imported[ref])
    assert entrypoint == [DAEMONS[daemon]]
    assert f"usage: {DAEMONS[daemon]}" in containerd.run(ref, *entrypoint, "--help")


def test_product_images_carry_no_test_bed(
    imported: dict[str, Path], containerd: Containerd
) -> None:
    """The installed kubevirt-py distribution (the wheel the images are built from) lists
    virt_api and the daemons but no file of the test bed (localkube)."""
    script = (
        "import importlib.metadata as m; files = [str(f) for f in m.files('kubevirt-py')];"
        " print(sorted({f.split('/')[0] for f in files if f.endswith('.py')}))"
    )
    out = containerd.run(f"{REGISTRY}/virt-controller:dev", "python3", "-c", script)
    assert "'virt_api'" in out and "'controller'" in out and "'shared'" in out, out
    assert "localkube" not in out, out


def test_controller_runs_unprivileged(imported: dict[str, Path], containerd: Containerd) -> None:
    """The controller image runs as 65532, not root."""
    assert containerd.run(f"{REGISTRY}/virt-controller:dev", "id", "-u").strip() == "65532"


def test_launcher_image_carries_libvirt_qemu_and_busybox(
    imported: dict[str, Path], containerd: Containerd
) -> None:
    """libvirt-python loads libvirt's library, with the project importable beside it; the
    daemon, QEMU, the tools the launcher runs and /bin/busybox (for containerDisks) exist."""
    ref = f"{REGISTRY}/virt-launcher:dev"
    out = containerd.run(
        ref,
        "python3",
        "-c",
        "import libvirt, launcher.main; print('libvirt', libvirt.getVersion())",
    )
    assert out.startswith("libvirt "), out
    out = containerd.run(
        ref, "sh", "-ec",
        "libvirtd --version; qemu-system-x86_64 --version; qemu-img --version; tini --version;"
        " genisoimage --version; unshare --version; /bin/busybox true && echo busybox ok",
    )  # fmt: skip
    for expected in ("libvirtd (libvirt)", "QEMU emulator", "qemu-img", "tini", "genisoimage"):
        assert expected in out
    assert "busybox ok" in out


def test_pause_image_runs(imported: dict[str, Path], containerd: Containerd) -> None:
    """The pause image's entry point is the static pause binary, which runs FROM scratch."""
    ref = f"{REGISTRY}/pause:3.10"
    assert _entrypoint(imported[ref]) == ["/pause"]
    assert "pause.c v" in containerd.run(ref, "/pause", "-v")


def test_tiny_guest_is_a_container_disk(imported: dict[str, Path], containerd: Containerd) -> None:
    """The guest image has KubeVirt's containerDisk layout (disk under /disk, kernel and
    initrd under /boot, owned by 107), read with a busybox brought in as launcher pods do."""
    busybox = shutil.which("busybox") or "/bin/busybox"
    out = containerd.run(
        f"{REGISTRY}/tiny-guest:v1",
        "/busybox", "stat", "-c", "%n %u %s", "/disk/disk.qcow2", "/boot/vmlinuz", "/boot/initrd.img",
        mounts=(f"type=bind,src={busybox},dst=/busybox,options=rbind:ro",),
    )  # fmt: skip
    stats = {line.split()[0]: line.split()[1:] for line in out.splitlines()}
    assert set(stats) == {"/disk/disk.qcow2", "/boot/vmlinuz", "/boot/initrd.img"}, out
    assert all(uid == "107" and int(size) > 0 for uid, size in stats.values()), out


def test_launcher_image_boots_the_container_disk_guest(
    imported: dict[str, Path], containerd: Containerd, tmp_path: Path
) -> None:
    """The guest's files, copied out of the containerDisk image with busybox (as launcher
    pods do), boot under TCG through a libvirtd and QEMU from the launcher image."""
    busybox = shutil.which("busybox") or "/bin/busybox"
    containerd.run(
        f"{REGISTRY}/tiny-guest:v1",
        "/busybox", "cp", "/disk/disk.qcow2", "/boot/vmlinuz", "/boot/initrd.img", "/out/",
        mounts=(
            f"type=bind,src={busybox},dst=/busybox,options=rbind:ro",
            f"type=bind,src={tmp_path},dst=/out,options=rbind:rw",
        ),
    )  # fmt: skip
    script = BOOT_SCRIPT.replace("MARKER", repr(BOOT_MARKER))
    console = containerd.run(
        f"{REGISTRY}/virt-launcher:dev", "python3", "-c", script,
        mounts=(f"type=bind,src={tmp_path},dst=/guest,options=rbind:ro",),
    )  # fmt: skip
    assert BOOT_MARKER in console
