"""`memory-dump get|download|remove`: KubeVirt's virtctl memory-dump.

    virtctl-py memory-dump get VM [--claim-name=C [--create-claim [--storage-class=S]
                                   [--access-mode=M]]] [--output=FILE [--format=gzip|raw]]
    virtctl-py memory-dump download VM --output=FILE
    virtctl-py memory-dump remove VM

`get` PUTs the VM's memorydump subresource (with --create-claim it first makes the claim,
sized as KubeVirt sizes it: (the guest's memory + 100 MiB) x 1.055 (5.5% filesystem
overhead); with --output it then downloads, as `download` does: wait for
status.memoryDumpRequest Completed, export the claim (a VirtualMachineExport named
`export-<vm>-<claim>`, deleted afterwards) and fetch its tar.gz of the dump's file.
"""

from __future__ import annotations

import argparse
from typing import Any

from shared.kube import PVCS, VMIS, VMS, KubeClient, NotFound
from shared.model import VirtualMachine, VirtualMachineInstance
from shared.model.memorydump import MemoryDumpPhase, needed_bytes
from virtctl_py import vmexport
from virtctl_py.errors import CliError, Exit
from virtctl_py.lifecycle import VM_SUBRESOURCES
from virtctl_py.session import Target
from virtctl_py.wait import wait_until

WAIT_TIMEOUT = 600.0
ACCESS_MODES = ("ReadWriteOnce", "ReadWriteMany")


async def memory_dump(kube: KubeClient, target: Target, args: argparse.Namespace) -> str:
    """The `memory-dump` verb."""
    if args.action == "remove":
        await kube.call_subresource(
            "PUT",
            VM_SUBRESOURCES,
            args.name,
            namespace=target.namespace,
            subresource="removememorydump",
        )
        return f"Successfully submitted remove memory dump association of VM {args.name}"
    if args.action == "download":
        return await download(kube, target, args)
    if args.create_claim:
        if not args.claim_name:
            raise CliError("missing claim name (--claim-name)", code=Exit.USAGE)
        await create_claim(kube, target.namespace, args)
    body = {"claimName": args.claim_name} if args.claim_name else {}
    await kube.call_subresource(
        "PUT",
        VM_SUBRESOURCES,
        args.name,
        namespace=target.namespace,
        subresource="memorydump",
        body=body,
    )
    done = f"Successfully submitted memory dump request of VM {args.name}"
    if args.output:
        return f"{done}\n{await download(kube, target, args)}"
    return done


def claim_body(
    name: str, *, size: int, storage_class: str | None, access_mode: str | None
) -> dict[str, Any]:
    """The claim virtctl makes for a dump (a Filesystem claim, ReadWriteOnce unless told)."""
    if access_mode is not None and access_mode not in ACCESS_MODES:
        raise CliError(
            "invalid access mode, use either ReadWriteOnce or ReadWriteMany if supported",
            code=Exit.USAGE,
        )
    spec: dict[str, Any] = {
        "accessModes": [access_mode or "ReadWriteOnce"],
        "resources": {"requests": {"storage": str(size)}},
    }
    if storage_class:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": spec,
    }


async def create_claim(kube: KubeClient, namespace: str, args: argparse.Namespace) -> None:
    vm = VirtualMachine.from_dict(await kube.get(VMS, args.name, namespace=namespace))
    if vm.status.memory_dump_request is not None:
        raise CliError(
            "please remove current memory dump association before creating a new "
            "claim for a new memory dump"
        )
    try:
        await kube.get(PVCS, args.claim_name, namespace=namespace)
    except NotFound:
        pass
    else:
        raise CliError(
            f"PVC {namespace}/{args.claim_name} already exists, check if it should "
            "be created if not remove create flag"
        )
    vmi = VirtualMachineInstance.from_dict(await kube.get(VMIS, args.name, namespace=namespace))
    size = needed_bytes(vmi.spec.domain.guest_memory_bytes() or 0)
    body = claim_body(
        args.claim_name, size=size, storage_class=args.storage_class, access_mode=args.access_mode
    )
    await kube.create(PVCS, body, namespace=namespace)


async def completed_claim(kube: KubeClient, namespace: str, vm: str, *, timeout: float) -> str:
    """The claim of the VM's memory dump, once Completed (Failed: why)."""
    found: list[str] = []

    async def probe() -> tuple[bool, str]:
        request = VirtualMachine.from_dict(
            await kube.get(VMS, vm, namespace=namespace)
        ).status.memory_dump_request
        if request is None:
            return False, "no memory dump request yet"
        if request.phase is MemoryDumpPhase.FAILED:
            raise CliError(f"the memory dump failed: {request.message or 'no reason given'}")
        found[:] = [request.claim_name or ""]
        return request.phase is MemoryDumpPhase.COMPLETED, str(request.phase or "")

    await wait_until(probe, what=f"memory dump of VM {vm}", timeout=timeout)
    return found[0]


async def download(kube: KubeClient, target: Target, args: argparse.Namespace) -> str:
    if not args.output:
        raise CliError("missing --output to download the memory dump", code=Exit.USAGE)
    claim = await completed_claim(kube, target.namespace, args.name, timeout=WAIT_TIMEOUT)
    if not claim:
        raise CliError("claim name not on vm memory dump request")
    export = argparse.Namespace(
        name=f"export-{args.name}-{claim}",
        pvc=claim,
        vm=None,
        snapshot=None,
        ttl=None,
        output=args.output,
        volume=None,
        format=args.format,
        local_port=args.local_port,
        insecure=True,
        keep_vme=False,
        delete_vme=False,
        readiness_timeout=WAIT_TIMEOUT,
    )
    return await vmexport.download(kube, target, export)
