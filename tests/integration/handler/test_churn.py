"""Issue 5: 100 VMI create/delete cycles on the local cluster leave nothing behind.

The real controller renders real launcher pods, node01's node agent runs them, the real
handler drives them to Running (the domain runs in QEMU) and, once the VMI is deleted,
stops the guest; the VMI is gone only once its launcher pod is. Ten cycles are in flight
at once to keep the test short; one cycle in 25 (c000, c025, ...) waits for the guest to
boot, so its delete powers the guest off by ACPI instead of destroying it when the grace
ends (none of those near the end, where it would run alone).
"""

from __future__ import annotations

import asyncio
import copy
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.procs import read_pidfile
from localkube.testing import pod_logs, wait_for
from shared.kube import PODS, VMIS, KubeClient, NotFound
from shared.model import VirtualMachineInstance, VMIPhase
from tests.integration.controller.harness import ControllerProcess, sum_series
from tests.integration.handler.cluster import HandlerProcess, qemu_pid, serial_log
from tests.integration.handler.leftovers import (
    Footprint,
    cgroup_partitions,
    host_libvirt_files,
    left_by,
    mounts,
    open_fds,
    processes,
    rss_kib,
    zombie_children,
)
from tests.integration.launcher.harness import BOOT_MARKER, EXAMPLE_VMI

pytestmark = [pytest.mark.integration, pytest.mark.cluster]
T = TypeVar("T")

CYCLES = 100
IN_FLIGHT = 10
BOOTED_EVERY = 25  # these wait for the guest to boot and power off by ACPI
BOOT_MEMORY = "128Mi"  # what the guest needs to boot
KILL_MEMORY = "64Mi"  # the others need not boot: QEMU runs, the grace ends, it is destroyed
KILL_GRACE = 2
ACPI_GRACE = 60
RUNNING_TIMEOUT = 240.0
GONE_TIMEOUT = 180.0
POLL = 0.25  # seconds between looks at a cycle's VMI (each look is one GET)
PARTITIONS_TIMEOUT = 30.0  # the handler's informer sees the deletion, then it sweeps
BASELINE_AFTER = 10  # cycles: the daemons' RSS and open files are sampled then
RSS_MARGIN_KIB = 48 * 1024  # a leak check, not a budget: generous
FD_MARGIN = 16
HANDLER_TABLES = (
    "kubevirt_py_handler_vmis_tracked",
    "kubevirt_py_handler_domains_cached",
    "kubevirt_py_handler_launcher_connections",
)
# The node agent cleans up after a pod whose processes or mounts outlived it; for these
# pods it must never have had to.
AGENT_CLEANUPS = ("process_killed_by_reaper", "pod_mount_left_behind", "pod_worker_failed")


def churn_body(name: str, *, grace: int, memory: str) -> dict[str, Any]:
    """The example VMI on node01 (whose handler runs)."""
    body: dict[str, Any] = copy.deepcopy(yaml.safe_load(EXAMPLE_VMI.read_text()))
    body["metadata"] = {"name": name}
    spec = body["spec"]
    spec["terminationGracePeriodSeconds"] = grace
    spec["nodeSelector"] = {"kubernetes.io/hostname": "node01"}
    spec["domain"]["memory"]["guest"] = memory
    spec["domain"]["resources"]["requests"]["memory"] = memory
    return body


@dataclass(frozen=True, slots=True)
class Usage:
    """A daemon's resident memory and open files at one moment."""

    rss_kib: int
    fds: int

    @classmethod
    def of(cls, pid: int) -> Usage:
        return cls(rss_kib=rss_kib(pid), fds=open_fds(pid))

    def within(self, baseline: Usage) -> bool:
        return (
            self.rss_kib <= baseline.rss_kib + RSS_MARGIN_KIB
            and self.fds <= baseline.fds + FD_MARGIN
        )


@dataclass
class Churn:
    """Runs the cycles; each checks, once its VMI is gone, that its run left nothing."""

    kube: KubeClient
    ns: str
    handler: HandlerProcess
    controller: ControllerProcess
    cluster: Cluster
    done: list[Footprint] = field(default_factory=list)
    baseline: dict[str, Usage] = field(default_factory=dict)
    midway: dict[str, float] = field(default_factory=dict)
    _next: Iterator[int] = field(default_factory=lambda: iter(range(CYCLES)))

    @property
    def ours(self) -> set[int]:
        """Processes the test started itself (they name the pods dir, legitimately)."""
        return {p.pid for p in (self.handler.proc, self.controller.proc) if p is not None}

    def daemons(self) -> dict[str, int]:
        """The pids of node01's handler and node agent."""
        agent = read_pidfile(self.cluster.paths.pidfile("nodeagent-node01"))
        assert self.handler.proc is not None and agent is not None
        return {"handler": self.handler.proc.pid, "node agent": agent}

    async def worker(self) -> None:
        for i in self._next:
            await self.cycle(i)

    async def cycle(self, i: int) -> None:
        name = f"c{i:03d}"
        try:
            await self._cycle(name, booted=i % BOOTED_EVERY == 0)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{await self._context(name)}") from None

    async def _cycle(self, name: str, *, booted: bool) -> None:
        body = (
            churn_body(name, grace=ACPI_GRACE, memory=BOOT_MEMORY)
            if booted
            else churn_body(name, grace=KILL_GRACE, memory=KILL_MEMORY)
        )
        await self.kube.create(VMIS, body, namespace=self.ns)
        vmi = await wait_for(
            lambda: self._get(name),
            lambda v: v.status.phase is VMIPhase.RUNNING or v.is_final(),
            what=f"{self.ns}/{name} Running",
            timeout=RUNNING_TIMEOUT,
            interval=POLL,
            show=lambda v: v.to_dict().get("status"),
        )
        assert vmi.status.phase is VMIPhase.RUNNING, f"{vmi.key}: {vmi.to_dict().get('status')}"
        (pod_uid,) = vmi.status.active_pods
        fp = Footprint(
            vmi=vmi.key, vmi_uid=vmi.uid, pod_uid=pod_uid, pod_dir=self.handler.pods_dir / pod_uid
        )
        self._assert_qemu_runs(fp)
        if booted:
            await wait_for(
                _now(lambda: serial_log(self.handler, pod_uid)),
                lambda s: BOOT_MARKER in s,
                what=f"{name}'s guest booted",
                timeout=RUNNING_TIMEOUT,
                interval=POLL,
                show=lambda s: s[-1500:],
            )
        await self.kube.delete(VMIS, name, namespace=self.ns)
        await wait_for(
            lambda: self._gone(name),
            bool,
            what=f"{self.ns}/{name} gone",
            timeout=GONE_TIMEOUT,
            interval=POLL,
        )
        # Gone means its launcher pod is gone, and the node agent deletes a pod's object
        # only after its processes ended and its directory went: nothing may be left now
        # but a cgroup partition of a launcher that could not remove it (killed when the
        # pod's grace ended, or its QEMU still exiting), which the handler removes once it
        # forgets the VMI: that converges, within a bound.
        leftovers = left_by(fp, exclude=self.ours, cgroups=False)
        assert not leftovers, "\n".join(leftovers)
        await wait_for(
            _now(lambda: cgroup_partitions(fp.vmi_uid)),
            lambda left: not left,
            what=f"{fp.vmi}'s cgroup partitions removed by the handler",
            timeout=PARTITIONS_TIMEOUT,
            interval=0.1,
        )
        self.done.append(fp)
        await self._sample()

    def _assert_qemu_runs(self, fp: Footprint) -> None:
        pid = qemu_pid(self.handler, fp.pod_uid)
        assert pid is not None, f"{fp.vmi} Running without a QEMU pid file"
        qemu = [p for p in processes(cmdline=[fp.vmi_uid]) if p.kind == "qemu"]
        assert [p.pid for p in qemu] == [pid], f"{fp.vmi} Running, QEMU {pid}: {qemu}"

    async def _sample(self) -> None:
        """After the first cycles: the daemons' baseline; half-way: the handler's tables
        are bounded by what is in flight (a per-cycle leak would be near 50 by now)."""
        if len(self.done) == BASELINE_AFTER:
            self.baseline = {name: Usage.of(pid) for name, pid in self.daemons().items()}
        if len(self.done) == CYCLES // 2:
            for name in HANDLER_TABLES:
                self.midway[name] = await self.handler.metric(name)
            assert all(v <= 2 * IN_FLIGHT for v in self.midway.values()), self.midway

    async def _get(self, name: str) -> VirtualMachineInstance:
        return VirtualMachineInstance.from_dict(await self.kube.get(VMIS, name, namespace=self.ns))

    async def _gone(self, name: str) -> bool:
        try:
            await self.kube.get(VMIS, name, namespace=self.ns)
        except NotFound:
            return True
        return False

    async def _context(self, name: str) -> str:
        """What the node agent said about the VMI's launcher pod, and the pod's output."""
        prefix = f"virt-launcher-{name}-"
        log = self.cluster.paths.log("nodeagent-node01").read_text(errors="replace")
        parts = ["node agent:", *[line for line in log.splitlines() if prefix in line][-40:]]
        # A launcher that cannot start for a device: what both ends of the plugin said.
        parts += ["node agent, device plugins:", *_device_lines(log)]
        parts += ["handler, device plugins:", *_device_lines(self.handler.log())]
        for pod in (await self.kube.list(PODS, namespace=self.ns)).items:
            if pod["metadata"]["name"].startswith(prefix):
                parts.append(f"pod {pod['metadata']['name']}: status {pod.get('status')}")
                parts.append("output:\n" + pod_logs(self.cluster.config, pod)[-3000:])
        return "\n".join(parts)

    def agent_log(self) -> list[str]:
        """The node agent's log lines about these pods."""
        log = self.cluster.paths.log("nodeagent-node01").read_text(errors="replace")
        pods = {fp.pod_uid for fp in self.done}
        return [line for line in log.splitlines() if any(u in line for u in pods)]


@pytest.mark.timeout(1800)
async def test_100_create_delete_cycles_leave_nothing_behind(
    kube: KubeClient,
    ns: str,
    handler_cluster: Cluster,
    controller: ControllerProcess,
    cluster_node: HandlerProcess,
) -> None:
    """100 VMIs (ten at a time) are created, reach Running with their domain in QEMU, are
    deleted and disappear. Once each is gone, no process of its run (QEMU, libvirtd, tini,
    launcher), no mount of its pod in any mount namespace, no cgroup partition and no pod
    directory (sockets, emptyDirs) is left. At the end: no VMI or pod in the namespace, no
    domain file in the host's libvirt, the notify directory holds only the handler's
    socket, every launcher exited 0 and the node agent never had to reap or unmount
    anything for these pods; the same handler process still serves, with its per-VMI
    tables empty and no kubevirt_vmi_* series left. Handler and node agent keep their RSS
    and open files within a margin of what they had after the first ten cycles, and leave
    no zombie children."""
    churn = Churn(
        kube=kube, ns=ns, handler=cluster_node, controller=controller, cluster=handler_cluster
    )
    daemons = churn.daemons()
    async with asyncio.TaskGroup() as tg:
        for _ in range(IN_FLIGHT):
            tg.create_task(churn.worker())
    assert len(churn.done) == CYCLES

    assert not (await kube.list(VMIS, namespace=ns)).items
    assert not (await kube.list(PODS, namespace=ns)).items
    _assert_node_clean(churn)
    agent_log = churn.agent_log()
    cleanups = [line for line in agent_log if any(e in line for e in AGENT_CLEANUPS)]
    assert not cleanups, "\n".join(cleanups[:20])
    # Init containers (copying the containerDisk files) exit too: count the launchers.
    exits = [
        line for line in agent_log if "container_exited" in line and "container=compute" in line
    ]
    assert len(exits) == CYCLES, "\n".join(exits)  # each launcher ran once ...
    failed = [line for line in exits if re.search(r"\bexit_code=0\b", line) is None]
    assert not failed, "\n".join(failed[:20])  # ... and stopped cleanly

    assert churn.daemons() == daemons  # neither restarted
    assert cluster_node.proc is not None and cluster_node.proc.returncode is None
    assert (await cluster_node.get("/healthz"))[0] == 200
    await _assert_handler_forgot(cluster_node, ns)
    for name, pid in daemons.items():
        usage = Usage.of(pid)
        assert usage.within(churn.baseline[name]), (name, churn.baseline[name], usage)
        assert not zombie_children(pid), (name, zombie_children(pid))


def _assert_node_clean(churn: Churn) -> None:
    """Nothing of any cycle on the node, looked for all at once."""
    uids = [fp.vmi_uid for fp in churn.done]
    pod_uids = [fp.pod_uid for fp in churn.done]
    left = processes(
        cmdline=[churn.ns, *uids, *(f"{fp.pod_dir}/" for fp in churn.done)],
        env=[f"KVPY_POD={u}" for u in pod_uids],
        exclude=churn.ours,
    )
    assert not left, "\n".join(map(str, left))
    assert not mounts(pod_uids)
    assert not [c for u in uids for c in cgroup_partitions(u)]
    assert not host_libvirt_files(churn.ns)
    assert not [fp.pod_dir for fp in churn.done if fp.pod_dir.exists()]
    notify = churn.handler.notify_socket
    assert [p.name for p in notify.parent.iterdir()] == [notify.name]


async def _assert_handler_forgot(handler: HandlerProcess, ns: str) -> None:
    """The handler's per-VMI state is empty (it forgets a VMI when its informer sees the
    deletion, a moment after the VMI is gone) and its metrics name no VMI of `ns`."""

    async def tables() -> dict[str, float]:
        return {name: await handler.metric(name) for name in HANDLER_TABLES}

    await wait_for(tables, lambda t: not any(t.values()), what="handler tables empty")
    status, text = await handler.get("/metrics")
    assert status == 200
    assert f'namespace="{ns}"' not in text
    assert sum_series(text, "kubevirt_workqueue_depth", {"name": "virt-handler-vmi"}) == 0


def _device_lines(log: str) -> list[str]:
    """The last device-plugin lines of a daemon's log (registrations, drops, capacity)."""
    keys = ("device_plugin", "device_capacity", "device_health", "kubelet_")
    return [line for line in log.splitlines() if any(k in line for k in keys)][-20:]


def _now(fn: Callable[[], T]) -> Callable[[], Awaitable[T]]:
    async def probe() -> T:
        return fn()

    return probe
