"""Volume expansion for the local cluster's CSI driver, in place of the external-resizer
(not served here): a loop that watches claims of the driver whose `spec.resources.requests`
grew past their PersistentVolume's capacity, and does what the resizer does:

1. ControllerExpandVolume on the driver's controller socket;
2. the PV's `spec.capacity` set to the new size;
3. the claim's status: done (`status.capacity`) when the driver needs no node step, else
   `allocatedResourceStatuses: NodeResizePending` (+ the FileSystemResizePending condition),
   which makes the kubelet of the node using the claim call NodeExpandVolume and finish
   the claim's status itself.
Everything through kubectl (the API) and the CSI socket; polling, a test bed's simplicity.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from localkube.csi import proto as p
from localkube.csi.errors import CsiError
from localkube.csi.rpc import call
from localkube.csi.service import DRIVER
from localkube.errors import CommandFailed
from localkube.procs import run_cmd
from shared.model.quantity import parse_bytes

log = structlog.get_logger()
POLL = 1.0
CALL_TIMEOUT = 120.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Resize:
    namespace: str
    claim: str
    pv: str
    volume_id: str
    size: int


def pending_resizes(claims: list[dict[str, Any]], pvs: list[dict[str, Any]]) -> list[Resize]:
    """The bound claims of this driver asking for more than their PV has."""
    by_name = {pv["metadata"]["name"]: pv for pv in pvs}
    found = []
    for claim in claims:
        pv = by_name.get(claim.get("spec", {}).get("volumeName", ""))
        if pv is None or claim.get("status", {}).get("phase") != "Bound":
            continue
        csi = pv["spec"].get("csi") or {}
        if csi.get("driver") != DRIVER:
            continue
        want = parse_bytes(claim["spec"]["resources"]["requests"]["storage"])
        have = parse_bytes(pv["spec"]["capacity"]["storage"])
        if want > have:
            meta = claim["metadata"]
            found.append(
                Resize(
                    namespace=meta["namespace"],
                    claim=meta["name"],
                    pv=pv["metadata"]["name"],
                    volume_id=csi["volumeHandle"],
                    size=want,
                )
            )
    return found


def claim_status_patch(resize: Resize, *, node_step: bool) -> dict[str, Any]:
    """The claim's status after the controller step."""
    size = str(resize.size)
    if not node_step:
        return {
            "status": {
                "capacity": {"storage": size},
                "allocatedResources": {"storage": size},
                "allocatedResourceStatuses": None,
                "conditions": None,
            }
        }
    return {
        "status": {
            "allocatedResources": {"storage": size},
            "allocatedResourceStatuses": {"storage": "NodeResizePending"},
            "conditions": [
                {
                    "type": "FileSystemResizePending",
                    "status": "True",
                    "message": "Waiting for user to (re-)start a pod to finish file system "
                    "resize of volume on node.",
                }
            ],
        }
    }


class Expander:
    def __init__(self, *, kubectl: Path, kubeconfig: Path, endpoint: Path) -> None:
        self.kubectl = [str(kubectl), "--kubeconfig", str(kubeconfig)]
        self.endpoint = endpoint

    async def _get(self, kind: str) -> list[dict[str, Any]]:
        out = await run_cmd([*self.kubectl, "get", kind, "-A", "-o", "json"], timeout=30)
        items: list[dict[str, Any]] = json.loads(out)["items"]
        return items

    async def run(self) -> None:
        while True:
            try:
                resizes = pending_resizes(await self._get("pvc"), await self._get("pv"))
                for resize in resizes:
                    await self.expand(resize)
            except (CommandFailed, CsiError, ValueError, KeyError) as exc:
                log.warning("expansion_pass_failed", error=str(exc)[:500])
            await asyncio.sleep(POLL)

    async def expand(self, resize: Resize) -> None:
        request = p.ControllerExpandVolumeRequest(
            volume_id=resize.volume_id, capacity_range=p.CapacityRange(required_bytes=resize.size)
        )
        reply = await call(
            self.endpoint,
            f"/{p.CSI_PACKAGE}.Controller/ControllerExpandVolume",
            request,
            p.ControllerExpandVolumeResponse,
            timeout=CALL_TIMEOUT,
        )
        pv_patch = {"spec": {"capacity": {"storage": str(reply.capacity_bytes)}}}
        await run_cmd(
            [*self.kubectl, "patch", "pv", resize.pv, "--type=merge", "-p", json.dumps(pv_patch)],
            timeout=30,
        )
        status = claim_status_patch(resize, node_step=reply.node_expansion_required)
        await run_cmd(
            [*self.kubectl, "-n", resize.namespace, "patch", "pvc", resize.claim,
             "--subresource=status", "--type=merge", "-p", json.dumps(status)],
            timeout=30,
        )  # fmt: skip
        log.info(
            "claim_expanded",
            claim=f"{resize.namespace}/{resize.claim}",
            size=reply.capacity_bytes,
            node_step=reply.node_expansion_required,
        )
