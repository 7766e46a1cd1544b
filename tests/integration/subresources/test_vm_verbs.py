"""VM start/stop/restart through kube-apiserver: an `edit` user may, a `view` user may not.

No VM controller runs here: the test checks the object writes the API makes for the caller
(runStrategy, status.stateChangeRequests), which is what KubeVirt's virt-api does too.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from localkube.testing import wait_for
from tests.integration.subresources.conftest import Kubectl, Ran, ServiceAccount
from tests.integration.subresources.stack import REPO, Stack
from tests.integration.subresources.test_aggregated import bind
from virtctl_py.errors import Exit


async def virtctl(sa: ServiceAccount, *args: str) -> Ran:
    """virtctl-py as the ServiceAccount, flags after the verb as users type them."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "virtctl_py", *args, "-n", sa.namespace,
        "--kubeconfig", str(sa.kubeconfig),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=REPO,
    )  # fmt: skip
    try:
        async with asyncio.timeout(60):
            out, err = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return Ran(proc.returncode, out.decode(), err.decode())


async def get(kubectl: Kubectl, ns: str, kind: str, name: str) -> dict[str, Any]:
    ran = await kubectl("get", kind, name, "-n", ns, "-o", "json")
    assert ran.code == 0, ran.stderr
    return dict(json.loads(ran.stdout))


async def make_vm(kubectl: Kubectl, ns: str, name: str, strategy: str) -> None:
    vmi = yaml.safe_load((REPO / "examples" / "vmi-tiny.yaml").read_text())
    vm = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"runStrategy": strategy, "template": {"spec": vmi["spec"]}},
    }
    ran = await kubectl("create", "-f", "-", stdin=json.dumps(vm))
    assert ran.code == 0, ran.stderr


async def make_running_vmi(kubectl: Kubectl, ns: str, name: str, tmp: Path) -> str:
    """A VMI of the VM's name, marked Running (no handler runs here); its UID."""
    body = yaml.safe_load((REPO / "examples" / "vmi-tiny.yaml").read_text())
    body["metadata"] = {"name": name, "namespace": ns}
    ran = await kubectl("create", "-f", "-", stdin=json.dumps(body))
    assert ran.code == 0, ran.stderr
    status = json.dumps({"status": {"phase": "Running", "nodeName": "node01"}})
    ran = await kubectl(
        "patch", "vmi", name, "-n", ns, "--subresource=status", "--type=merge", "-p", status
    )
    assert ran.code == 0, ran.stderr
    return str((await get(kubectl, ns, "vmi", name))["metadata"]["uid"])


async def test_edit_user_starts_stops_and_restarts(
    stack: Stack, kubectl: Kubectl, service_account: ServiceAccount, tmp_path: Path
) -> None:
    """Bound to Kubernetes' own `edit` (kubevirt.io:edit aggregates into it), a user with no
    right on virtualmachines/status starts, stops and restarts a VM with virtctl-py: the API
    writes runStrategy and status.stateChangeRequests for them; a running VM's start is a
    409 in KubeVirt's words."""
    sa, ns, name = service_account, service_account.namespace, "vm-edit"
    await make_vm(kubectl, ns, name, "Halted")
    await bind(kubectl, sa, "edit")
    can = await kubectl(
        "auth", "can-i", "patch", "virtualmachines.kubevirt.io", "--subresource=status",
        "-n", ns, f"--as={sa.user}",
    )  # fmt: skip
    assert can.stdout.strip() == "no"

    started = await wait_for(
        lambda: virtctl(sa, "start", name),
        lambda ran: ran.code == 0,
        what="the RoleBinding (and the aggregation into edit) to take effect",
        timeout=60,
        show=lambda ran: ran.stderr,
    )
    assert started.stdout.strip() == f"VM {name} was scheduled to start"
    assert (await get(kubectl, ns, "vm", name))["spec"]["runStrategy"] == "Always"

    stopped = await virtctl(sa, "stop", name)
    assert stopped.code == 0, stopped.stderr
    assert (await get(kubectl, ns, "vm", name))["spec"]["runStrategy"] == "Halted"

    # restart needs a VMI and a strategy that restarts; the VM has a status (the `test` op).
    patch = json.dumps({"spec": {"runStrategy": "Always"}})
    assert (await kubectl("patch", "vm", name, "-n", ns, "--type=merge", "-p", patch)).code == 0
    status = json.dumps({"status": {"printableStatus": "Running"}})
    ran = await kubectl(
        "patch", "vm", name, "-n", ns, "--subresource=status", "--type=merge", "-p", status
    )
    assert ran.code == 0, ran.stderr
    uid = await make_running_vmi(kubectl, ns, name, tmp_path)
    restarted = await virtctl(sa, "restart", name)
    assert restarted.code == 0, restarted.stderr
    vm = await get(kubectl, ns, "vm", name)
    assert vm["status"]["stateChangeRequests"] == [
        {"action": "Stop", "uid": uid},
        {"action": "Start"},
    ]
    again = await virtctl(sa, "restart", name)
    assert again.code == Exit.CONFLICT, again.stderr
    assert "stop/start already underway" in again.stderr

    running = await virtctl(sa, "start", name)
    assert running.code == Exit.CONFLICT
    assert (
        f'Operation cannot be fulfilled on virtualmachine.kubevirt.io "{name}": '
        "VM is already running" in running.stderr
    )


async def test_view_user_cannot_start_stop_or_restart(
    stack: Stack, kubectl: Kubectl, service_account: ServiceAccount
) -> None:
    """Bound to `view`, a user may read the VM but each verb is a 403 naming the subresource
    and the role to ask for; the VM is unchanged."""
    sa, ns, name = service_account, service_account.namespace, "vm-view"
    await make_vm(kubectl, ns, name, "Halted")
    await bind(kubectl, sa, "view")
    await wait_for(
        lambda: kubectl("get", "vm", name, "-n", ns, kubeconfig=sa.kubeconfig),
        lambda ran: ran.code == 0,
        what="the RoleBinding to take effect",
        timeout=60,
    )
    for verb in ("start", "stop", "restart"):
        refused = await virtctl(sa, verb, name)
        assert refused.code == Exit.FORBIDDEN, refused.stderr
        assert f'cannot update resource "virtualmachines/{verb}"' in refused.stderr
        assert "kubevirt.io:edit" in refused.stderr
    assert (await get(kubectl, ns, "vm", name))["spec"]["runStrategy"] == "Halted"
