"""Guest ↔ pod TCP throughput and round-trip time per network binding, the same QEMU.

Each mode boots the same test guest under the same QEMU binary (TCG here) with one NIC and
measures, from a "pod" network namespace, against the guest's TCP echo (port 7), after an
untimed warm-up: the median round trip of small messages and the echo throughput of a bulk
transfer (sent and read back at once). Under TCG the emulated guest dominates both and a
boot's figures vary by up to 2x, so the modes are run in interleaved passes (--repeat) and
each reports the median of its passes.

Every mode's client runs in a second "peer pod" namespace joined to the "launcher pod"
namespace by a veth, so each crosses the same veth hop and only the binding differs:
- tap: the floor: the guest on a plain tap in the launcher pod namespace, which routes the
  client's packets to it (an address on the tap, no bridge, no NAT, no conntrack rule);
- masquerade / bridge: the launcher pod wired by virt-handler's own code
  (handler/netwire.py) and served DHCP by the launcher's (launcher/dhcp.py); the client
  reaches the launcher pod's address;
- passt: Debian's passt in the launcher pod (launcher/passt.py's arguments), QEMU on its
  socket (`-netdev stream`), the guest holding the pod's address from passt's DHCP;
- user: QEMU's user-mode network (the old masquerade), a hostfwd port on the pod's address;
- tap-local (only when asked): the tap with the client in the launcher pod itself (no veth
  hop; the floor the first runs used).

Addresses come from 198.19.250.0/23; nothing leaves the namespaces the script made, which
it removes on exit (SIGTERM/Ctrl-C too). Runs are bounded in count and time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from handler import netwire
from handler.netns import Launcher
from launcher.passt import PasstInterface
from launcher.passt import argv as passt_argv
from shared import podnet
from shared.podnet import Binding

POD_NET, PEER_IP, POD_IP = "198.19.250.0/24", "198.19.250.1", "198.19.250.2"
TAP_SERVER, TAP_GUEST = "198.19.251.1", "198.19.251.2"
GUEST_MAC = "02:00:00:62:6e:01"
MODES = ("tap", "masquerade", "bridge", "passt", "user")

CLIENT = r"""
import json, socket, statistics, sys, threading, time
host, port, total, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
deadline = time.monotonic() + 240
while True:
    try:
        c = socket.create_connection((host, port), timeout=5)
        c.sendall(b"ping\n"); c.settimeout(5)
        if c.recv(16):
            break
    except OSError:
        pass
    if time.monotonic() > deadline:
        print(json.dumps({"error": "guest echo not reachable"})); sys.exit(1)
    time.sleep(1)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
c.settimeout(30)
def round_trips(n):
    rtts = []
    for _ in range(n):
        t = time.perf_counter(); c.sendall(b"x" * 32); got = 0
        while got < 32:
            got += len(c.recv(64))
        rtts.append(time.perf_counter() - t)
    return rtts
def echo(size, limit=60.0):  # Mbit/s, and whether it stalled (not all back in `limit` s)
    def send():
        chunk = b"y" * 65536
        try:
            for _ in range(size // len(chunk)):
                c.sendall(chunk)
        except OSError:
            pass
    t = time.perf_counter(); th = threading.Thread(target=send, daemon=True); th.start()
    got, c_timeout = 0, c.gettimeout()
    c.settimeout(5)
    try:
        while got < size and time.perf_counter() - t < limit:
            try:
                n = len(c.recv(262144))
            except socket.timeout:
                continue
            if not n:
                break
            got += n
    finally:
        c.settimeout(c_timeout)
    return got * 8 / (time.perf_counter() - t) / 1e6, got < size
# Warm-up, untimed: the guest has just booted (its services settle, TCG translates the
# echo path's code once) and the first mode measured must not pay for it.
round_trips(rounds); echo(1 << 20)
rtt = statistics.median(round_trips(rounds)) * 1000
mbit_s, stalled = echo(total)
print(json.dumps({"rtt_ms": rtt, "mbit_s": mbit_s, "stalled": float(stalled)}))
"""


def sh(*argv: str, ns: str | None = None, check: bool = True) -> str:
    cmd = ["ip", "netns", "exec", ns, *argv] if ns else list(argv)
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=60).stdout


class Namespaces:
    """The run's namespaces, removed on exit."""

    def __init__(self, tag: str) -> None:
        self.pod, self.peer = f"kvbn-pod-{tag}", f"kvbn-peer-{tag}"
        self.made: list[str] = []

    def __enter__(self) -> Namespaces:
        for ns in (self.pod, self.peer):
            sh("ip", "netns", "add", ns)
            self.made.append(ns)
            sh("ip", "link", "set", "lo", "up", ns=ns)
        sh("ip", "link", "add", "eth0", "netns", self.pod, "type", "veth",
           "peer", "name", "peer0", "netns", self.peer)  # fmt: skip
        sh("ip", "addr", "add", f"{POD_IP}/24", "dev", "eth0", ns=self.pod)
        sh("ip", "link", "set", "eth0", "up", ns=self.pod)
        sh("ip", "route", "add", "default", "via", PEER_IP, ns=self.pod)
        sh("ip", "addr", "add", f"{PEER_IP}/24", "dev", "peer0", ns=self.peer)
        sh("ip", "link", "set", "peer0", "up", ns=self.peer)
        return self

    def __exit__(self, *exc: object) -> None:
        for ns in self.made:
            sh("ip", "netns", "del", ns, check=False)


@contextlib.contextmanager
def process(argv: list[str], *, ns: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(["ip", "netns", "exec", ns, *argv], stdout=out, stderr=out)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def qemu(guest: Path, netdev: str, serial: Path) -> list[str]:
    return [
        "qemu-system-x86_64", "-machine", "q35,accel=tcg", "-m", "256", "-smp", "1",
        "-display", "none", "-no-reboot", "-nodefaults", "-serial", f"file:{serial}",
        "-kernel", str(guest / "vmlinuz"), "-initrd", str(guest / "initrd.img"),
        "-append", "console=ttyS0 panic=-1 quiet",
        "-netdev", netdev, "-device", f"virtio-net-pci,netdev=n0,mac={GUEST_MAC}",
    ]  # fmt: skip


def dhcp_server(wired: podnet.WiredInterface) -> list[str]:
    code = (
        "import asyncio, sys; sys.path.insert(0, sys.argv[1]);"
        "from launcher import dhcp; from shared.podnet import PodWiring;"
        "w = PodWiring.from_json(sys.argv[2]).interfaces[0];"
        "asyncio.run(dhcp.serve(dhcp.lease_of(w, resolv='', hostname='bench'), w.bridge))"
    )
    return [sys.executable, "-c", code, str(REPO), podnet.PodWiring(interfaces=(wired,)).to_json()]


def wire(mode: str, nss: Namespaces) -> tuple[podnet.WiredInterface, str, str]:
    """The pod wired for `mode`: the DHCP lease's interface, the client's ns and target."""
    if mode in ("tap", "tap-local"):
        sh("ip", "tuntap", "add", "dev", "tap0", "mode", "tap", "vnet_hdr", ns=nss.pod)
        sh("ip", "addr", "add", f"{TAP_SERVER}/24", "dev", "tap0", ns=nss.pod)
        sh("ip", "link", "set", "tap0", "up", ns=nss.pod)
        wired = podnet.WiredInterface(
            name="bench", binding=Binding.MASQUERADE, tap="tap0", bridge="tap0",
            guest_ip=TAP_GUEST, prefix=24, server_ip=TAP_SERVER, gateway=TAP_SERVER,
        )  # fmt: skip
        if mode == "tap-local":
            return wired, nss.pod, TAP_GUEST
        sh("sysctl", "-qw", "net.ipv4.ip_forward=1", ns=nss.pod)  # routed, as masquerade is
        sh("ip", "route", "add", "198.19.251.0/24", "via", POD_IP, ns=nss.peer)
        return wired, nss.peer, TAP_GUEST
    sleeper = subprocess.Popen(["ip", "netns", "exec", nss.pod, "sleep", "600"])
    try:
        time.sleep(0.5)
        launcher = Launcher(pid=sleeper.pid, uid=os.getuid())  # `ip netns exec` execs sleep
        binding = Binding(mode)
        target = netwire.Target(index=0, name="bench", binding=binding, mac=GUEST_MAC)
        fn = netwire.bridge if binding is Binding.BRIDGE else netwire.masquerade
        wired = asyncio.run(fn(launcher, target))
    finally:
        sleeper.terminate()
        sleeper.wait()
    return wired, nss.peer, POD_IP


def bridge_nf_off(ns: str) -> None:
    """The namespace's bridges no longer hand frames to netfilter (br_netfilter's
    bridge-nf-call-* sysctls, per network namespace)."""
    for table in ("iptables", "ip6tables", "arptables"):
        sh("sysctl", "-qw", f"net.bridge.bridge-nf-call-{table}=0", ns=ns, check=False)


def passt_socket(work: Path) -> Path:
    """passt drops from root to nobody before it binds: a directory nobody may write."""
    sockets = work / "passt"
    sockets.mkdir(mode=0o777, exist_ok=True)
    sockets.chmod(0o777)
    return sockets / "bench.sock"


def setup(
    mode: str, nss: Namespaces, work: Path, *, no_bridge_nf: bool
) -> tuple[str, str, str, int, list[list[str]]]:
    """QEMU's netdev, the client's namespace, host and port, and the servers to run first
    (the launcher's DHCP responder, or passt)."""
    if mode == "user":
        netdev = f"user,id=n0,hostfwd=tcp:{POD_IP}:10007-:7"
        return netdev, nss.peer, POD_IP, 10007, []
    if mode == "passt":  # the launcher pod's sysctl: passt binds port 7 unprivileged
        sh("sysctl", "-qw", "net.ipv4.ip_unprivileged_port_start=0", ns=nss.pod)
        sock = passt_socket(work)
        iface = PasstInterface(alias="bench", socket=sock, mac=GUEST_MAC, forwards=(("tcp", (7,)),))
        netdev = f"stream,id=n0,server=off,addr.type=unix,addr.path={sock}"
        return netdev, nss.peer, POD_IP, 7, [passt_argv(iface)]
    wired, client_ns, host = wire(mode, nss)
    if no_bridge_nf:
        bridge_nf_off(nss.pod)
    netdev = f"tap,id=n0,ifname={wired.tap},script=no,downscript=no"
    return netdev, client_ns, host, 7, [dhcp_server(wired)]


def wait_for(path: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 10
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"passt did not start (status {proc.returncode})")
        time.sleep(0.05)


def run_mode(
    mode: str, guest: Path, work: Path, *, total: int, rounds: int, no_bridge_nf: bool = False
) -> dict[str, float]:
    with Namespaces(f"{os.getpid()}-{mode[:3]}") as nss:
        serial = work / f"{mode}.serial"
        netdev, client_ns, host, port, servers = setup(mode, nss, work, no_bridge_nf=no_bridge_nf)
        with contextlib.ExitStack() as stack:
            for i, argv in enumerate(servers):
                proc = stack.enter_context(
                    process(argv, ns=nss.pod, log=work / f"{mode}.server{i}.log")
                )
                if mode == "passt":
                    wait_for(passt_socket(work), proc)
            stack.enter_context(
                process(qemu(guest, netdev, serial), ns=nss.pod, log=work / f"{mode}.qemu.log")
            )
            out = subprocess.run(
                ["ip", "netns", "exec", client_ns, sys.executable, "-c", CLIENT, host, str(port),
                 str(total), str(rounds)],
                capture_output=True, text=True, timeout=400,
            )  # fmt: skip
        result: dict[str, float] = (
            json.loads(out.stdout.strip().splitlines()[-1]) if out.stdout.strip() else {}
        )
        if "rtt_ms" not in result:
            tail = serial.read_text(errors="replace")[-800:] if serial.exists() else ""
            raise SystemExit(
                f"{mode}: no result ({out.stdout}{out.stderr}); guest console:\n{tail}"
            )
        return result


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("guest", type=Path, help="the test guest's directory (scripts/build-guest)")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--mib", type=int, default=8, help="bulk echo size")
    p.add_argument("--rounds", type=int, default=200, help="round trips measured")
    p.add_argument(
        "--no-bridge-nf", action="store_true",
        help="bridge-nf-call-iptables=0 in the launcher pod (bridged frames skip netfilter)",
    )  # fmt: skip
    p.add_argument(
        "--repeat", type=int, default=3,
        help="passes over the modes, interleaved (each reports the median of its passes)",
    )  # fmt: skip
    args = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    runs: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="kvbn-") as tmp:
        os.chmod(tmp, 0o711)  # passt (root dropping to nobody) reaches its socket directory
        for n in range(args.repeat):
            for mode in args.modes.split(","):
                r = run_mode(
                    mode, args.guest, Path(tmp), total=args.mib << 20, rounds=args.rounds,
                    no_bridge_nf=args.no_bridge_nf,
                )  # fmt: skip
                runs.setdefault(mode, []).append(r)
                stalled = "  (bulk echo stalled: not all back in 60 s)" if r.get("stalled") else ""
                print(f"{n + 1}: {mode:<11} {r['mbit_s']:9.1f} Mbit/s  {r['rtt_ms']:8.3f} ms{stalled}",
                      flush=True)  # fmt: skip
    report(runs)


def report(runs: dict[str, list[dict[str, float]]]) -> None:
    """Per mode: the median over the passes of throughput and of the median round trip,
    and their ratio to the raw tap's."""
    results = {
        mode: {key: statistics.median(r[key] for r in rs) for key in ("mbit_s", "rtt_ms")}
        for mode, rs in runs.items()
    }
    raw = results.get("tap")
    passes = max(len(rs) for rs in runs.values())
    print(f"\nmedians of {passes} interleaved passes")
    print("mode        throughput   x raw    RTT (median)   x raw")
    for mode, r in results.items():
        tx = f"{r['mbit_s'] / raw['mbit_s']:.2f}" if raw else "-"
        rx = f"{r['rtt_ms'] / raw['rtt_ms']:.2f}" if raw else "-"
        stalls = sum(1 for x in runs[mode] if x.get("stalled"))
        note = f"   {stalls} stalled" if stalls else ""
        print(f"{mode:<11} {r['mbit_s']:8.1f} Mb/s {tx:>6}   {r['rtt_ms']:9.3f} ms   {rx:>6}{note}")


if __name__ == "__main__":
    main()
