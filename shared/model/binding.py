"""KubeVirt's network binding plugins: an interface's `binding: {name}` and the plugins the
KubeVirt CR registers (`spec.configuration.network.binding: {<name>: InterfaceBindingPlugin}`).

What each registered field does here (shared/netbinding.py resolves a plugin for the daemons):
- `networkAttachmentDefinition`: added to the launcher pod's multus annotation after the
  interface's own network (the binding's CNI prepares the pod), as KubeVirt's template does;
- `domainAttachmentType`: `managedTap` (virt-handler makes a bridge and a tap on the pod
  interface, no addresses of ours) or `tap` (the binding's CNI made the tap); the domain
  gets an `<interface type='ethernet'>` on the tap;
- `migration`: the interface does not keep the VMI from migrating; `method: link-refresh`
  takes the guest's link down and up once it runs on the target;
- `computeResourceOverhead`: added to the compute container's requests and limits;
- `sidecarImage`: a hook sidecar, which kubevirt-py does not run: refused at admission
  unless the plugin is one implemented natively (`passt`);
- `downwardAPI: device-info`: for a sidecar's eyes; accepted, nothing reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from shared.model._codec import Model, json_name
from shared.model.domain import PASST_PLUGIN, PluginBinding, ResourceRequirements

# interfaces[].binding lives in domain.py (no import circle); KubeVirt's passt plugin, by its
# registered name, is run by the launcher's own passt as `passtBinding` is (launcher/passt.py).
__all__ = ["PASST_PLUGIN", "PluginBinding"]

# Plugin names that kubevirt-py implements itself, whatever their sidecarImage says.
NATIVE_PLUGINS = frozenset({PASST_PLUGIN})


class DomainAttachmentType(StrEnum):
    """InterfaceBindingPlugin.domainAttachmentType (KubeVirt's two)."""

    TAP = "tap"
    MANAGED_TAP = "managedTap"


class MigrationMethod(StrEnum):
    """InterfaceBindingPlugin.migration.method (KubeVirt's one)."""

    LINK_REFRESH = "link-refresh"


class DownwardAPIType(StrEnum):
    """InterfaceBindingPlugin.downwardAPI (KubeVirt's one)."""

    DEVICE_INFO = "device-info"


@dataclass(frozen=True, slots=True, kw_only=True)
class InterfaceBindingMigration(Model):
    """InterfaceBindingPlugin.migration: present means migratable; `method` optional."""

    method: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InterfaceBindingPlugin(Model):
    """spec.configuration.network.binding.<name>."""

    sidecar_image: str | None = None
    network_attachment_definition: str | None = None
    domain_attachment_type: str | None = None
    migration: InterfaceBindingMigration | None = None
    downward_api: str | None = field(default=None, metadata=json_name("downwardAPI"))
    compute_resource_overhead: ResourceRequirements | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkConfiguration(Model):
    """spec.configuration.network (defaultNetworkInterface and
    permitBridgeInterfaceOnPodNetwork stay in `extra`)."""

    binding: Mapping[str, InterfaceBindingPlugin] = field(default_factory=dict)
