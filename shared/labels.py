"""Every label, annotation, finalizer and resource name that two daemons (or a daemon and
its users) share: the one home of these strings in the product.

They are KubeVirt's names: the controller, virt-api, the handler, the CLI and users'
selectors rely on them.
"""

from __future__ import annotations

# The app label on every launcher pod, and its value.
APP_LABEL = "kubevirt.io"
LAUNCHER_APP = "virt-launcher"
# The UID of the VMI a launcher pod runs (its owner).
CREATED_BY_LABEL = "kubevirt.io/created-by"
# The name of the VM that owns the VMI (on VMIs the VM controller creates, and their pods).
VM_LABEL = "kubevirt.io/vm"
# The node a VMI was handed to: the handler's informer selects on it.
NODE_NAME_LABEL = "kubevirt.io/nodeName"
# On migration target pods: the VMIM's UID.
MIGRATION_JOB_LABEL = "kubevirt.io/migrationJobUID"
# On nodes: "true" while a healthy handler runs there (the launcher pods' node selector).
SCHEDULABLE_LABEL = "kubevirt.io/schedulable"
# On nodes: the handler's last heartbeat (RFC 3339).
HEARTBEAT_ANNOTATION = "kubevirt.io/heartbeat"
# On nodes: where the node's handler serves actions (https://<host>:<port>), read by virt-api.
HANDLER_ENDPOINT_ANNOTATION = "kubevirt.io/handler-endpoint"
# On launcher pods: the VMI's name, for humans and `kubectl get pods`.
DOMAIN_ANNOTATION = "kubevirt.io/domain"
# On a launcher pod replacing n earlier ones that never ran: n (absent on the first).
LAUNCHER_ATTEMPT_ANNOTATION = "kubevirt.io/launcher-attempt"
DEFAULT_CONTAINER_ANNOTATION = "kubectl.kubernetes.io/default-container"

# On the VMI of a VM with runStrategy WaitAsReceiver: it waits for a decentralized
# migration's guest (phase WaitingForSync, no launcher pod of its own).
RECEIVER_ANNOTATION = "kubevirt.io/decentralized-receiver"
# On such a VM: the run strategy it takes once the guest runs (KubeVirt's).
RESTORE_RUN_STRATEGY_ANNOTATION = "kubevirt.io/restore-run-strategy"

# On VMIMs the evacuation controller creates: the node the VMI leaves.
EVACUATION_ANNOTATION = "kubevirt.io/evacuationMigration"
# On an attachment pod: the VMI volume it serves.
ATTACHMENT_VOLUME_ANNOTATION = "kubevirt.io/hotplug-volume"

# Held on a VMI until its launcher pods are gone.
VMI_FINALIZER = "kubevirt.io/virtualMachineControllerFinalize"
# Held on a VMIM until its target pod is gone and an abort (if any) has settled.
MIGRATION_FINALIZER = "kubevirt.io/migrationJobFinalize"

# Device-plugin resources the handler advertises.
DEVICE_RESOURCE_PREFIX = "devices.kubevirt.io/"
KVM_RESOURCE = "devices.kubevirt.io/kvm"
TUN_RESOURCE = "devices.kubevirt.io/tun"
VSOCK_RESOURCE = "devices.kubevirt.io/vhost-vsock"  # autoattachVSOCK's /dev/vhost-vsock

# The pod condition the controller mirrors onto a VMI while its pod cannot be placed.
POD_SCHEDULED = "PodScheduled"
UNSCHEDULABLE_REASON = "Unschedulable"
