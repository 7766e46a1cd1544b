"""What every controller loop stands on, built once by controller.app (tests build their own).

    deps = Deps(client=client, informers=informers, clock=utc_now, vmi_recent=Recent(),
                vmi_writer=StatusWriter(client, VMIS, model=VirtualMachineInstance))
    VMIController(deps, queue=..., pods=..., writer=..., templates=..., timing=...)

Each controller's constructor then names only what is its own (its queue, its writer, its
part of the configuration).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.informers import Informers
from controller.recent import Recent
from shared.kube import DiscardRecorder, KubeClient, Recorder, StatusWriter
from shared.kube.workqueue import Gate
from shared.model import Clock, VirtualMachineInstance


@dataclass(frozen=True, slots=True, kw_only=True)
class Deps:
    """The client, the caches, the clock and the writers the loops share."""

    client: KubeClient
    informers: Informers
    clock: Clock
    # VMIs written here whose new version the informer has not delivered yet.
    vmi_recent: Recent[VirtualMachineInstance]
    # VMI status writes made by loops other than the VMI controller's own.
    vmi_writer: StatusWriter[VirtualMachineInstance]
    recorder: Recorder = field(default_factory=DiscardRecorder)
    # Set when this replica is elected: until then the loops' queues ignore every key (a
    # standby fills none; controller.app re-queues the caches at election). None: ungated.
    leading: Gate | None = None
