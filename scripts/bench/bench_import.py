"""DataVolume import on real nodes (a private 2-node kubelet + containerd cluster,
kubevirt-py deployed from manifests/overlays/local). Printed:

(a) import throughput: a 1 GiB qcow2 image of random data, served by an in-cluster HTTP
    server pod (busybox httpd over a hostPath), imported by an http DataVolume (create →
    Succeeded: importer pod start, the fetch, qemu-img info/convert/resize) in MB/s, beside
    the honest floor: `qemu-img convert -O raw` on this host reading the same URL into a
    file on the same filesystem, durably (-t none, then a sync), and the ratio;
(b) create → Running of a VMI on a DataVolume cloned from the imported guest disk beside
    one on a containerDisk (examples/vmi-tiny.yaml), each `--rounds` times, median.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench_cluster import real_cluster
from import_watch import Watch, breakdown, uptime

from localkube.deploy import Kubectl

NAMESPACE = "bench-import"
GUEST_IMAGE = "registry.local/kubevirt-py/tiny-guest:v1"
LAUNCHER_IMAGE = "registry.local/kubevirt-py/virt-launcher:dev"
MB = 1_000_000
TIMEOUT = 900.0


def make_image(directory: Path, size_mib: int) -> Path:
    """A qcow2 image of `size_mib` MiB of random data (what an import really moves)."""
    raw, image = directory / "random.raw", directory / "image.qcow2"
    with raw.open("wb") as f:
        for _ in range(size_mib):
            f.write(_random_mib())
    subprocess.run(["qemu-img", "convert", "-f", "raw", "-O", "qcow2", str(raw), str(image)],
                   check=True)  # fmt: skip
    raw.unlink()
    image.chmod(0o644)
    directory.chmod(0o755)
    return image


def _random_mib() -> bytes:
    with open("/dev/urandom", "rb") as f:
        return f.read(1024 * 1024)


def host_convert(url: str, directory: Path, size: int, *, rounds: int = 3) -> list[float]:
    """MB/s of the honest floor, `rounds` times: `qemu-img convert -O raw` on this host
    reading the same URL the DataVolume imports (over HTTP, from the in-cluster server pod)
    into a file in `directory` (the filesystem the claims live on), written durably
    (`-t none`: O_DIRECT, then a sync inside the timed window), what an importer must do.
    One coroutine (-m 1), no -W: QEMU 7.2's curl driver stalls for good under parallel
    requests to busybox httpd (seen at 326 of 1024 MiB)."""
    subprocess.run(["sync"], check=True)  # the image's own writeback out of the first round
    speeds = []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory(dir=directory) as tmp:
            out = Path(tmp) / "out.raw"
            began = time.monotonic()
            subprocess.run(["qemu-img", "convert", "-m", "1", "-f", "qcow2", "-O", "raw",
                            "-t", "none", url, str(out)], check=True)  # fmt: skip
            subprocess.run(["sync", "-f", str(out)], check=True)
            speeds.append(size / MB / (time.monotonic() - began))
    return speeds


def wait(probe: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        seen = probe()
        if seen:
            return seen
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}")


def get(k: Kubectl, kind: str, name: str) -> dict[str, Any]:
    out = k("get", kind, name, "-n", NAMESPACE, "-o", "json", check=False)
    return json.loads(out) if out else {}


def apply(k: Kubectl, obj: dict[str, Any]) -> None:
    obj["metadata"]["namespace"] = NAMESPACE
    k("apply", "-f", "-", stdin=json.dumps(obj))


def datavolume(name: str, source: dict[str, Any], size: str) -> dict[str, Any]:
    return {
        "apiVersion": "cdi.kubevirt.io/v1beta1",
        "kind": "DataVolume",
        "metadata": {"name": name},
        "spec": {"source": source, "storage": {"resources": {"requests": {"storage": size}}}},
    }


def succeeded(k: Kubectl, name: str) -> dict[str, float]:
    """Wait for Succeeded; when (monotonic) each phase was first seen."""
    seen: dict[str, float] = {}

    def done() -> bool:
        phase = get(k, "dv", name).get("status", {}).get("phase")
        if phase == "Failed":
            raise SystemExit(f"DataVolume {name} failed: {get(k, 'dv', name)['status']}")
        seen.setdefault(str(phase), time.monotonic())
        return bool(phase == "Succeeded")

    wait(done, f"DataVolume {name} Succeeded")
    return seen


def http_server(k: Kubectl, directory: Path) -> str:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "http-images"},
        "spec": {
            "containers": [{
                "name": "httpd", "image": LAUNCHER_IMAGE,
                "command": ["/bin/busybox", "httpd", "-f", "-p", "8080", "-h", "/srv"],
                "volumeMounts": [{"name": "srv", "mountPath": "/srv", "readOnly": True}],
            }],
            "volumes": [{"name": "srv", "hostPath": {"path": str(directory)}}],
        },
    }  # fmt: skip
    apply(k, pod)

    def ip() -> str | None:
        status = get(k, "pod", "http-images").get("status", {})
        return status.get("podIP") if status.get("phase") == "Running" else None

    return f"http://{wait(ip, 'HTTP server Running')}:8080"


def import_throughput(k: Kubectl, base: str, size: int) -> tuple[float, float, list[str]]:
    """MB/s from create to Succeeded, and over the importer's own run (its first to its
    last step: fetch and qemu-img, without claim, pod start and status reporting); where
    the time went, from watches on the DataVolume and the importer pod."""
    dv = Watch(k.binary, k.kubeconfig, NAMESPACE, "datavolumes", "big")
    pod = Watch(k.binary, k.kubeconfig, NAMESPACE, "pods", "importer-big")
    time.sleep(1.0)  # both watches established before the create
    began = uptime()
    apply(k, datavolume("big", {"http": {"url": f"{base}/image.qcow2"}}, "1Gi"))
    succeeded(k, "big")
    wait(lambda: dv.first(("status", "phase"), "Succeeded"), "the Succeeded watch event")
    time.sleep(1.0)  # the pod's last events
    dv.stop()
    pod.stop()
    steps = breakdown(created=began, dv=dv, pod=pod)
    marks = dict(steps)
    end = marks["DataVolume Succeeded"]
    run = marks.get("importer done", end) - marks.get("importer start", 0.0)
    lines, last = [], 0.0
    for name, at in steps:
        lines.append(f"      {name:<28} {at:6.2f} s  (+{at - last:.2f})")
        last = at
    return size / MB / end, size / MB / run, lines


def vmi_running(k: Kubectl, vmi: dict[str, Any]) -> float:
    name = vmi["metadata"]["name"]
    began = time.monotonic()
    apply(k, vmi)
    wait(lambda: get(k, "vmi", name).get("status", {}).get("phase") == "Running",
         f"VMI {name} Running")  # fmt: skip
    took = time.monotonic() - began
    k("delete", "vmi", name, "-n", NAMESPACE, "--wait=true")
    return took


def on_clone(name: str, tiny: dict[str, Any]) -> dict[str, Any]:
    vmi: dict[str, Any] = json.loads(json.dumps(tiny))
    vmi["metadata"] = {"name": name}
    vmi["spec"]["volumes"] = [
        {"name": v["name"], "dataVolume": {"name": name}} if "containerDisk" in v else v
        for v in vmi["spec"]["volumes"]
    ]
    return vmi


def start_times(k: Kubectl, rounds: int) -> tuple[list[float], list[float]]:
    tiny: dict[str, Any] = yaml.safe_load((REPO / "examples" / "vmi-tiny.yaml").read_text())
    # Each is deleted once Running, its guest still booting and deaf to ACPI: a 1 s grace
    # instead of 30 (the stop is not measured).
    tiny["spec"]["terminationGracePeriodSeconds"] = 1
    node_pull = {"url": f"docker://{GUEST_IMAGE}", "pullMethod": "node"}  # imported on nodes
    apply(k, datavolume("golden", {"registry": node_pull}, "64Mi"))
    succeeded(k, "golden")
    cloned, container = [], []
    for i in range(rounds):
        name = f"clone-{i}"
        apply(k, datavolume(name, {"pvc": {"name": "golden"}}, "64Mi"))
        succeeded(k, name)
        cloned.append(vmi_running(k, on_clone(name, tiny)))
        plain = json.loads(json.dumps(tiny))
        plain["metadata"] = {"name": f"cd-{i}"}
        container.append(vmi_running(k, plain))
    return cloned, container


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="image size (MiB)")
    parser.add_argument("--rounds", type=int, default=3, help="VMI starts of each kind")
    parser.add_argument("--session", type=int, help="test session PID's real-node cluster")
    args = parser.parse_args()
    size = args.mib * 1024 * 1024
    with tempfile.TemporaryDirectory(prefix="kvpy-bench-import-") as tmp:
        image = make_image(Path(tmp), args.mib)
        with real_cluster(args.session, certs=Path(tmp) / "certs") as (_, k):
            k("create", "namespace", NAMESPACE)
            try:
                base = http_server(k, image.parent)
                hosts = host_convert(f"{base}/{image.name}", Path(tmp), size)
                ours, window, lines = import_throughput(k, base, size)
                cloned, container = start_times(k, args.rounds)
            finally:  # on a test session's cluster, nothing of ours stays
                k("delete", "namespace", NAMESPACE, "--wait=false", check=False)
    print(f"(a) import of a {args.mib} MiB qcow2 (random data) into a claim's disk.img")
    print(f"    http DataVolume, create -> Succeeded   {ours:8.1f} MB/s")
    print(f"    the importer's own run (start -> done) {window:8.1f} MB/s")
    print("    where the time went (s after the create, +since the line before):")
    print("\n".join(lines))
    host = statistics.median(hosts)
    rounds = ", ".join(f"{h:.1f}" for h in hosts)
    print(f"    floor: host qemu-img convert of the URL {host:7.1f} MB/s  (median of {rounds})")
    print("      (same HTTP URL, same filesystem, -t none + sync: durable)")
    print(f"    ratio, create -> Succeeded             {ours / host:8.2f}x  (target >= 0.8x)")
    print(f"    ratio, the importer's own run          {window / host:8.2f}x")
    print(f"(b) VMI create -> Running, median of {args.rounds}")
    print(f"    on a cloned DataVolume                 {statistics.median(cloned):8.2f} s")
    print(f"    on a containerDisk                     {statistics.median(container):8.2f} s")


if __name__ == "__main__":
    main()
