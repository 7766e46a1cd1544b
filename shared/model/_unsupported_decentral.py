"""What kubevirt-py does not run of decentralized live migration (docs/migration.md):
refused at admission naming the field (shared/model/unsupported.py calls this).

It runs between two namespaces of this cluster (a sendTo naming this cluster's own
synchronization address pairs in process) and with another cluster (any other `host:port`:
the receiving controller's synchronization endpoint, controller/migration/
decentral_remote.py); the form of connectURL is checked by _validate_decentral.py. A VMIM
that is both halves and a pool of receivers are refused.
"""

from __future__ import annotations

from shared.model.enums import RunStrategy
from shared.model.errors import FieldError
from shared.model.migration import VirtualMachineInstanceMigration
from shared.model.objects import KubeObject
from shared.model.pool import VirtualMachinePool

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
    return []
