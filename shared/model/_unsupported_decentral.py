"""What kubevirt-py does not run of decentralized live migration (docs/migration.md):
refused at admission naming the field (shared/model/unsupported.py calls this).

Between two namespaces of this cluster it runs: the sending VMIM's controller pairs in
process with the receiving VMIM (controller/migration/decentral_io.py). A sendTo must
therefore name this cluster's own synchronization address (LOCAL_SYNC_ADDRESSES); another
cluster's is refused, as are a VMIM that is both halves and a pool of receivers.
"""

from __future__ import annotations

from shared.model.enums import RunStrategy
from shared.model.errors import FieldError
from shared.model.migration import VirtualMachineInstanceMigration
from shared.model.objects import KubeObject
from shared.model.pool import VirtualMachinePool

LOCAL_SYNC_PORT = 9185
_HOST = "virt-synchronization-controller.kubevirt.svc"
# This cluster's synchronization address (KubeVirt's virt-synchronization-controller):
# the one a sendTo pairing inside the cluster names.
LOCAL_SYNC_ADDRESSES = frozenset(
    {f"{_HOST}:{LOCAL_SYNC_PORT}", f"{_HOST}.cluster.local:{LOCAL_SYNC_PORT}"}
)
OTHER_CLUSTER = (
    "another cluster's synchronization address is not supported by kubevirt-py "
    "(decentralized migration runs between namespaces of one cluster: use "
    f"{_HOST}:{LOCAL_SYNC_PORT})"
)
BOTH_HALVES = "a VMIM that both sends and receives is not supported by kubevirt-py"
POOL_RECEIVER = "WaitAsReceiver is not supported by kubevirt-py in a pool's VM template"


def decentral_unsupported(obj: KubeObject) -> list[FieldError]:
    """The decentralized-migration uses of `obj` kubevirt-py refuses."""
    if isinstance(obj, VirtualMachinePool):
        template = obj.spec.virtual_machine_template
        if template is not None and template.spec.run_strategy is RunStrategy.WAIT_AS_RECEIVER:
            path = "spec.virtualMachineTemplate.spec.runStrategy"
            value = str(RunStrategy.WAIT_AS_RECEIVER)
            return [FieldError(path=path, message=POOL_RECEIVER, value=value)]
        return []
    if not isinstance(obj, VirtualMachineInstanceMigration):
        return []
    send, receive = obj.spec.send_to, obj.spec.receive
    if send is not None and receive is not None:
        return [FieldError(path="spec.receive", message=BOTH_HALVES, value=receive.to_dict())]
    url = send.connect_url if send is not None else None
    if url and url not in LOCAL_SYNC_ADDRESSES:
        return [FieldError(path="spec.sendTo.connectURL", message=OTHER_CLUSTER, value=url)]
    return []
