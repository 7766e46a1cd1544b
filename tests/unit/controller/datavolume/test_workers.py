"""The worker pods' watch: an importer pod's change syncs its DataVolume at once."""

from __future__ import annotations

from typing import cast

from controller.datavolume.controller import DataVolumeController, WorkerImage
from controller.datavolume.workers import WORKER_SELECTOR, decode_worker
from controller.informers import build_informers
from shared.kube import DATAVOLUMES, KubeClient, QueueConfig, Registry, StatusWriter, WorkQueue
from shared.model.datavolume import DataVolume
from tests.unit.controller import builders
from tests.unit.shared.kube.fakes import FakeApi


def _pod(labels: dict[str, str], phase: str = "Succeeded") -> dict[str, object]:
    meta = {"name": "importer-disk", "namespace": "ns", "labels": labels}
    return {"metadata": meta, "status": {"phase": phase}}


def test_worker_pod_names_its_datavolume() -> None:
    """The watch keeps the pod's DataVolume label and phase; no label, no DataVolume."""
    labels = {"app": "containerized-data-importer", "cdi.kubevirt.io/dataVolume": "disk"}
    view = decode_worker(_pod(labels))
    assert view.datavolume_key == "ns/disk" and view.phase == "Succeeded"
    assert decode_worker(_pod({"app": "containerized-data-importer"})).datavolume_key is None
    assert WORKER_SELECTOR == "app=containerized-data-importer"


async def test_worker_pod_change_enqueues_its_datavolume() -> None:
    """An added or updated worker pod puts its DataVolume's key on the queue (no poll wait);
    a pod without the label is ignored."""
    client = cast(KubeClient, FakeApi())
    registry = Registry()
    informers = build_informers(client)
    queue = WorkQueue(QueueConfig(name="datavolume"), registry=registry)
    ctl = DataVolumeController(
        builders.deps(client, informers, registry=registry),
        queue=queue,
        writer=StatusWriter(client, DATAVOLUMES, model=DataVolume, registry=registry),
        worker=WorkerImage(image="launcher"),
    )
    handlers = ctl.worker_handlers()
    assert handlers.on_update is not None and handlers.on_add is not None
    labels = {"app": "containerized-data-importer", "cdi.kubevirt.io/dataVolume": "disk"}
    handlers.on_add(decode_worker(_pod({"app": "containerized-data-importer"})))
    assert len(queue) == 0
    running, done = decode_worker(_pod(labels, "Running")), decode_worker(_pod(labels))
    handlers.on_update(running, done)
    assert await queue.get() == "ns/disk"
