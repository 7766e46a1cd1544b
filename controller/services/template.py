"""The pod template service: a VMI (and, for migrations, a VMIM) in, a launcher Pod dict out.

Kept apart from the controllers so the contract between the controller, the launcher and
the handler lives in one place and is tested without a cluster:

- name `virt-launcher-<vmi>-<5 chars>`; the 5 chars are derived from the VMI's UID (the
  VMIM's for a migration target), so a create retried after a lost answer meets
  AlreadyExists instead of making a second pod;
- owned by the VMI (controller=true), labelled `kubevirt.io=virt-launcher` and
  `kubevirt.io/created-by=<vmi uid>` (+ the VMI's own labels, + `kubevirt.io/vm`);
- memory request = guest memory (* 100 / the KubeVirt CR's memoryOvercommit) + our measured
  overhead (controller/services/overhead.py);
- launcher grace = VMI grace + 15 s (`--grace-period-seconds`), pod grace = VMI grace + 30 s;
- the `sockets` emptyDir the handler finds under the kubelet's pods dir, a `private`
  emptyDir for the launcher's state, and the handlers' notify directory as a hostPath
  mounted at the same path: the launcher dials `<notify dir>/<its node>/domain-notify.sock`
  (default /var/run/kubevirt-py/nodes/<node>/domain-notify.sock, where the handler listens);
- what the VMI's volumes need in the pod (controller/volumes, one module per source):
  containerDisk and kernelBoot images as read-only image volumes (no copy; with
  `--container-disk-delivery=Copy`, files copied out of them by init containers into the
  `container-disks` emptyDir, mounted read-only in the compute container); PVCs and
  hostDisks as pod volumes under `vmi-disks/<volume>` (the layout is shared/podlayout.py's,
  which the launcher reads by); the `hotplug-disks` emptyDir (HostToContainer) where
  virt-handler bind-mounts hotplugged claims' disks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.config import ContainerDiskDelivery, TemplateConfig
from controller.errors import SyncError
from controller.services import consolelog, dedicated, tpm, virtiofs, vmstate, volumes
from controller.services.compute import (
    NODE_NAME_ENV,
    compute_resources,
    launcher_args,
)
from controller.services.cpuselect import apply_cpu_placement
from controller.services.probes import container_probes
from controller.services.scheduling import excluding_node, pod_fields, with_added_selector
from controller.services.security import (
    allow_passt,
    compute_security_context,
    launcher_seccomp,
    passt,
    pod_security_context,
)
from controller.services.volumes import Claim
from shared import multus, netbinding, podlayout
from shared.labels import (
    APP_LABEL,
    CREATED_BY_LABEL,
    DEFAULT_CONTAINER_ANNOTATION,
    DOMAIN_ANNOTATION,
    LAUNCHER_APP,
    LAUNCHER_ATTEMPT_ANNOTATION,
    MIGRATION_JOB_LABEL,
    NODE_NAME_LABEL,
    SCHEDULABLE_LABEL,
    VM_LABEL,
)
from shared.launcherpod import COMPUTE_CONTAINER
from shared.model import (
    ConditionReason,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
)
from shared.naming import fit

POD_NAME_PREFIX = "virt-launcher-"
# Kubernetes' rand.String alphabet (no vowels, no confusable digits).
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
SUFFIX_LEN = 5
MAX_NAME = 253

# Grace added on top of the VMI's: the launcher's (to finish its own shutdown) and the pod's.
LAUNCHER_GRACE_EXTRA = 15
POD_GRACE_EXTRA = 30


def pod_suffix(seed: str) -> str:
    """Five characters of the Kubernetes alphabet, derived from `seed` (stable per seed)."""
    n = int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "big")
    chars = []
    for _ in range(SUFFIX_LEN):
        n, i = divmod(n, len(SUFFIX_ALPHABET))
        chars.append(SUFFIX_ALPHABET[i])
    return "".join(chars)


def pod_name(vmi_name: str, seed: str) -> str:
    """`virt-launcher-<vmi>-<suffix>`, cut with a hash (shared.naming) to ≤ 253 chars."""
    return fit(f"{POD_NAME_PREFIX}{vmi_name}", suffix=pod_suffix(seed), limit=MAX_NAME)


@dataclass(frozen=True, slots=True)
class TemplateService:
    """Renders launcher pods from VMIs; pure, so it is tested without a cluster."""

    config: TemplateConfig

    def launcher_pod(
        self,
        vmi: VirtualMachineInstance,
        *,
        claims: Mapping[str, Claim] | None = None,
        attempt: int = 0,
    ) -> dict[str, Any]:
        """The launcher Pod of a VMI; `claims`: the PVCs it names, as read (by name);
        `attempt` n > 0: the pod replacing n refused ones (another name)."""
        seed = vmi.uid if attempt == 0 else f"{vmi.uid}/{attempt}"
        pod = self._pod(vmi, seed=seed, extra_labels={}, claims=claims or {})
        if attempt:
            pod["metadata"]["annotations"][LAUNCHER_ATTEMPT_ANNOTATION] = str(attempt)
        # The VMI's probes (a migration target's guest is not there yet: it has none).
        pod["spec"]["containers"][0].update(container_probes(vmi))
        return pod

    def target_pod(
        self,
        vmi: VirtualMachineInstance,
        migration: VirtualMachineInstanceMigration,
        *,
        source_node: str,
        claims: Mapping[str, Claim] | None = None,
    ) -> dict[str, Any]:
        """A migration target pod: the launcher pod, labelled with the VMIM's UID and kept
        off the source node ("": none here, a decentralized migration from another
        cluster); `claims`: the block-mode ones (their devices, as the source's)."""
        pod = self._pod(
            vmi,
            seed=migration.uid,
            extra_labels={MIGRATION_JOB_LABEL: migration.uid},
            claims=claims or {},
        )
        spec = pod["spec"]
        if source_node:
            spec["affinity"] = excluding_node(spec.get("affinity"), source_node)
        spec["nodeSelector"] = with_added_selector(
            spec["nodeSelector"], migration.spec.added_node_selector
        )
        return pod

    def _pod(
        self,
        vmi: VirtualMachineInstance,
        *,
        seed: str,
        extra_labels: dict[str, str],
        claims: Mapping[str, Claim],
    ) -> dict[str, Any]:
        if not vmi.uid or not vmi.name:
            raise SyncError(ConditionReason.FAILED_CREATE, "VMI has no name or UID yet")
        grace = vmi.spec.grace_period_seconds
        ctx = volumes.RenderContext(claims=claims, image_volumes=not self._copies())
        sources = volumes.render(vmi, ctx)
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": self._metadata(vmi, seed=seed, extra_labels=extra_labels),
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": grace + POD_GRACE_EXTRA,
                "nodeSelector": {**vmi.spec.node_selector, SCHEDULABLE_LABEL: "true"},
                "automountServiceAccountToken": False,
                "enableServiceLinks": False,
                "initContainers": [*self._copy_init_containers(), *sources.init_containers],
                "containers": [self._container(vmi, grace + LAUNCHER_GRACE_EXTRA, sources)],
                "volumes": self._volumes(vmi, sources),
            },
        }
        pod["spec"].update(pod_fields(vmi))  # affinity, tolerations, DNS, … as written
        apply_cpu_placement(vmi, pod["spec"])  # cpu.model and cpu.features' node labels
        if not self.config.launcher_as_root:
            pod["spec"]["securityContext"] = pod_security_context(seccomp=self._seccomp(vmi))
        if secondary := netbinding.pod_networks(self.config.binding_plugins, vmi):  # multus
            pod["metadata"]["annotations"][multus.NETWORKS_ANNOTATION] = secondary
        if default := multus.default_network_annotation(vmi):  # multus makes eth0 from it
            pod["metadata"]["annotations"][multus.DEFAULT_NETWORK_ANNOTATION] = default
        if consolelog.wanted(vmi, cluster_disabled=self.config.serial_console_log_disabled):
            pod["spec"]["containers"].append(self._console_log_container(vmi))
        pod["spec"]["containers"] += virtiofs.containers(
            vmi, mounts=sources.mounts, image=self.config.launcher_image,
            pull_policy=self.config.image_pull_policy, security_context=self._sidecar_sc(vmi),
        )  # fmt: skip
        if passt(vmi):
            allow_passt(pod["spec"])
        dedicated.apply_pod(vmi, pod["spec"])  # hugepages volume, Guaranteed sidecars
        if sources.service_account_name:  # a serviceAccount volume's (KubeVirt's rule)
            pod["spec"]["serviceAccountName"] = sources.service_account_name
        if sources.pull_secrets:  # containerDisk/kernelBoot imagePullSecret, as KubeVirt
            pod["spec"]["imagePullSecrets"] = [{"name": s} for s in sources.pull_secrets]
        return pod

    def _volumes(
        self, vmi: VirtualMachineInstance, sources: volumes.PodVolumes
    ) -> list[dict[str, Any]]:
        return [
            {"name": podlayout.SOCKETS_VOLUME, "emptyDir": {}},
            {"name": podlayout.PRIVATE_VOLUME, "emptyDir": {}},
            {"name": podlayout.NOTIFY_VOLUME, "hostPath": self._notify_host_path()},
            *self._copy_volumes(),
            {"name": podlayout.HOTPLUG_DISKS_VOLUME, "emptyDir": {}},
            *self._seed_volumes(),
            *sources.volumes,
            *tpm.volumes(vmi),
            *vmstate.volumes(vmi),
            *virtiofs.volumes(vmi),
        ]

    def _metadata(
        self, vmi: VirtualMachineInstance, *, seed: str, extra_labels: dict[str, str]
    ) -> dict[str, Any]:
        return {
            "name": pod_name(vmi.name, seed),
            "namespace": vmi.namespace,
            "labels": {**self._labels(vmi), **extra_labels},
            "annotations": {
                DOMAIN_ANNOTATION: vmi.name,
                DEFAULT_CONTAINER_ANNOTATION: COMPUTE_CONTAINER,
            },
            "ownerReferences": [_owner(vmi)],
        }

    def _copies(self) -> bool:
        """containerDisk/kernelBoot files are copied by init containers (the fallback)."""
        return self.config.container_disk_delivery == ContainerDiskDelivery.COPY

    def _copy_volumes(self) -> list[dict[str, Any]]:
        if not self._copies():
            return []
        return [
            {"name": podlayout.BINARY_VOLUME, "emptyDir": {}},
            {"name": podlayout.CONTAINER_DISKS_VOLUME, "emptyDir": {}},
        ]

    def _copy_mounts(self) -> list[dict[str, Any]]:
        if not self._copies():
            return []
        return [{"name": podlayout.CONTAINER_DISKS_VOLUME,
                 "mountPath": podlayout.CONTAINER_DISKS_DIR, "readOnly": True}]  # fmt: skip

    def _copy_init_containers(self) -> list[dict[str, Any]]:
        """busybox out of the launcher image, for the image copies (podlayout's contract)."""
        if not self._copies():
            return []
        return [{
            "name": podlayout.BINARY_INIT_CONTAINER,
            "image": self.config.launcher_image,
            "imagePullPolicy": self.config.image_pull_policy,
            "command": [
                podlayout.LAUNCHER_BUSYBOX,
                "cp",
                podlayout.LAUNCHER_BUSYBOX,
                podlayout.BUSYBOX,
            ],
            "volumeMounts": [{"name": podlayout.BINARY_VOLUME, "mountPath": podlayout.BINARY_DIR}],
        }]  # fmt: skip

    def _node_seed(self) -> bool:
        """The node's QEMU capability cache is mounted (a shared dir named instead wins)."""
        return self.config.node_capabilities_seed and not self.config.capabilities_seed

    def _seed_volumes(self) -> list[dict[str, Any]]:
        """The node's QEMU capability cache, made by virt-handler (podlayout's contract)."""
        if not self._node_seed():
            return []
        path = {"path": podlayout.QEMU_CAPABILITIES_SEED_DIR, "type": "DirectoryOrCreate"}
        return [{"name": podlayout.QEMU_CAPABILITIES_VOLUME, "hostPath": path}]

    def _seed_mounts(self) -> list[dict[str, Any]]:
        if not self._node_seed():
            return []
        return [{"name": podlayout.QEMU_CAPABILITIES_VOLUME,
                 "mountPath": podlayout.QEMU_CAPABILITIES_SEED_DIR, "readOnly": True}]  # fmt: skip

    def _notify_host_path(self) -> dict[str, str]:
        return {"path": self.config.notify_host_dir, "type": "DirectoryOrCreate"}

    def _labels(self, vmi: VirtualMachineInstance) -> dict[str, str]:
        """The VMI's labels (so Services that select VMIs select their pods), then ours."""
        labels = {k: v for k, v in vmi.metadata.labels.items() if k != NODE_NAME_LABEL}
        labels[APP_LABEL] = LAUNCHER_APP
        labels[CREATED_BY_LABEL] = vmi.uid
        owner = vmi.metadata.controller_ref()
        if owner is not None and owner.kind == "VirtualMachine" and owner.name:
            labels[VM_LABEL] = owner.name
        return labels

    def _container(
        self, vmi: VirtualMachineInstance, launcher_grace: int, sources: volumes.PodVolumes
    ) -> dict[str, Any]:
        container: dict[str, Any] = {
            "name": COMPUTE_CONTAINER,
            "image": self.config.launcher_image,
            "imagePullPolicy": self.config.image_pull_policy,
            "args": [*launcher_args(self.config, vmi, launcher_grace), *sources.launcher_args],
            "env": [
                {"name": NODE_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            ],
            "resources": self.resources(vmi),
            "volumeMounts": [
                {"name": podlayout.SOCKETS_VOLUME, "mountPath": podlayout.SOCKETS_DIR},
                {"name": podlayout.PRIVATE_VOLUME, "mountPath": podlayout.PRIVATE_DIR},
                {"name": podlayout.NOTIFY_VOLUME, "mountPath": self.config.notify_host_dir},
                *self._copy_mounts(),
                {  # hotplugged disks appear here while the launcher runs (podlayout)
                    "name": podlayout.HOTPLUG_DISKS_VOLUME,
                    "mountPath": podlayout.HOTPLUG_DISKS_DIR,
                    "mountPropagation": "HostToContainer",
                },
                *self._seed_mounts(),
                *sources.mounts,
                *tpm.mounts(vmi),
                *vmstate.mounts(vmi),
                *virtiofs.compute_mounts(vmi),
            ],
        }
        if not self.config.launcher_as_root:
            container["securityContext"] = compute_security_context(seccomp=self._seccomp(vmi))
        if sources.devices:  # block-mode claims (controller/services/volumes/pvc.py)
            container["volumeDevices"] = list(sources.devices)
        if self.config.launcher_command:
            container["command"] = list(self.config.launcher_command)
        return container

    def _console_log_container(self, vmi: VirtualMachineInstance) -> dict[str, Any]:
        """guest-console-log, as the compute container's user (controller/services/consolelog)."""
        return consolelog.container(
            image=self.config.launcher_image,
            pull_policy=self.config.image_pull_policy,
            security_context=self._sidecar_sc(vmi),
        )

    def _sidecar_sc(self, vmi: VirtualMachineInstance) -> dict[str, Any] | None:
        """A sidecar's securityContext: the compute container's user (none: root)."""
        if self.config.launcher_as_root:
            return None
        return compute_security_context(seccomp=self._seccomp(vmi))

    def _seccomp(self, vmi: VirtualMachineInstance) -> dict[str, str]:
        """The launcher's seccompProfile: passt's for passt VMIs, else the KubeVirt CR's
        Localhost one, else the runtime's default (controller/services/security.py)."""
        return launcher_seccomp(vmi, self.config.seccomp_localhost_profile)

    def resources(self, vmi: VirtualMachineInstance) -> dict[str, dict[str, str]]:
        """Requests and limits: guest memory + overhead, CPU, and the device resources."""
        return compute_resources(self.config, vmi)


def _owner(vmi: VirtualMachineInstance) -> dict[str, Any]:
    return vmi.controller_reference().to_dict()
