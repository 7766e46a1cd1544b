"""The label, annotation, finalizer and resource names the controller reads and writes.

They are KubeVirt's names: the handler, the CLI and users' selectors rely on them.
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
# On launcher pods: the VMI's name, for humans and `kubectl get pods`.
DOMAIN_ANNOTATION = "kubevirt.io/domain"
DEFAULT_CONTAINER_ANNOTATION = "kubectl.kubernetes.io/default-container"

# Held on a VMI until its launcher pods are gone.
VMI_FINALIZER = "kubevirt.io/virtualMachineControllerFinalize"
# Held on a VMIM until its target pod is gone and an abort (if any) has settled.
MIGRATION_FINALIZER = "kubevirt.io/migrationJobFinalize"

# Device-plugin resources the handler advertises.
KVM_RESOURCE = "devices.kubevirt.io/kvm"
TUN_RESOURCE = "devices.kubevirt.io/tun"

# The pod condition the controller mirrors onto a VMI while its pod cannot be placed.
POD_SCHEDULED = "PodScheduled"
UNSCHEDULABLE_REASON = "Unschedulable"
