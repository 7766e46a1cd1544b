"""KubeVirt's network binding plugins, resolved once for every daemon: the KubeVirt CR's
`spec.configuration.network.binding` (validated, naming the field) and, per interface, the
plugin its `binding: {name}` refers to (shared/model/binding.py says what each field does).

The controller reads a plugin's NAD and resource overhead when it makes the launcher pod;
virt-handler wires a `managedTap` or `tap` interface and writes it into the pod wiring
contract (shared/podnet.py), which is all the launcher needs; the `passt` plugin is the
launcher's passt, by name (`Interface.uses_passt`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from shared import multus, nics
from shared.model import FieldError, Interface, QuantityError, VirtualMachineInstance
from shared.model._validate_common import DNS1123_SUBDOMAIN
from shared.model.binding import (
    NATIVE_PLUGINS,
    PASST_PLUGIN,
    DomainAttachmentType,
    DownwardAPIType,
    InterfaceBindingPlugin,
    MigrationMethod,
    NetworkConfiguration,
)
from shared.model.domain import ResourceList, ResourceRequirements

E = TypeVar("E", DomainAttachmentType, MigrationMethod, DownwardAPIType)
FIELD = "spec.configuration.network.binding"
MAX_NAME = 253


@dataclass(frozen=True, slots=True, kw_only=True)
class Overhead:
    """computeResourceOverhead, parsed (bytes, millicores; 0: none)."""

    request_memory: int = 0
    request_cpu_millis: int = 0
    limit_memory: int = 0
    limit_cpu_millis: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class BindingPlugin:
    """One registered plugin, as the daemons use it."""

    name: str
    sidecar_image: str = ""
    nad: str = ""  # `name` (the VMI's namespace) or `namespace/name`; "": none
    attachment: DomainAttachmentType | None = None
    migratable: bool = False  # `migration` present
    link_refresh: bool = False  # migration.method: link-refresh
    overhead: Overhead = Overhead()

    @property
    def native(self) -> bool:
        """A plugin kubevirt-py implements itself (its sidecar is not needed)."""
        return self.name in NATIVE_PLUGINS

    def refusal(self) -> str | None:
        """Why an interface cannot use this plugin here (None: it can)."""
        if self.native:
            return None
        where = f"{FIELD}.{self.name}"
        if self.sidecar_image:
            return (
                f"binding plugin {self.name!r} needs its hook sidecar ({where}.sidecarImage): "
                "kubevirt-py runs no hook sidecars; register it with a domainAttachmentType "
                f"only, or use a binding kubevirt-py implements ({PASST_PLUGIN!r})"
            )
        if self.attachment is None:
            return (
                f"binding plugin {self.name!r} sets no domainAttachmentType ({where}): "
                "the domain would get no interface for it"
            )
        return None


def _enum(errors: list[FieldError], path: str, cls: type[E], value: str | None) -> E | None:
    if not value:
        return None
    try:
        return cls(value)
    except ValueError:
        known = ", ".join(str(v) for v in cls)
        errors.append(FieldError(path=path, message=f"must be one of {known}", value=value))
        return None


def _nad(errors: list[FieldError], path: str, value: str | None) -> str:
    if not value:
        return ""
    parts = value.split("/")
    if len(parts) > 2 or not all(
        p and len(p) <= MAX_NAME and DNS1123_SUBDOMAIN.fullmatch(p) for p in parts
    ):
        message = "must be a NetworkAttachmentDefinition: <name> or <namespace>/<name>"
        errors.append(FieldError(path=path, message=message, value=value))
        return ""
    return value


def _amounts(errors: list[FieldError], path: str, rl: ResourceList) -> tuple[int, int]:
    memory = cpu = 0
    for key in rl.extra:
        message = "only memory and cpu overheads are supported"
        errors.append(FieldError(path=f"{path}.{key}", message=message, value=rl.extra[key]))
    try:
        memory = rl.memory_bytes() or 0
    except QuantityError as e:
        errors.append(FieldError(path=f"{path}.memory", message=e.message, value=rl.memory))
    try:
        cpu = rl.cpu_millis() or 0
    except QuantityError as e:
        errors.append(FieldError(path=f"{path}.cpu", message=e.message, value=rl.cpu))
    for key, amount in (("memory", memory), ("cpu", cpu)):
        if amount < 0:
            errors.append(FieldError(path=f"{path}.{key}", message="must not be negative"))
    return max(memory, 0), max(cpu, 0)


def _overhead(errors: list[FieldError], path: str, rr: ResourceRequirements | None) -> Overhead:
    if rr is None:
        return Overhead()
    req_mem, req_cpu = _amounts(errors, f"{path}.requests", rr.requests)
    lim_mem, lim_cpu = _amounts(errors, f"{path}.limits", rr.limits)
    return Overhead(
        request_memory=req_mem, request_cpu_millis=req_cpu,
        limit_memory=lim_mem, limit_cpu_millis=lim_cpu,
    )  # fmt: skip


def _plugin(errors: list[FieldError], name: str, p: InterfaceBindingPlugin) -> BindingPlugin:
    path = f"{FIELD}.{name}"
    attachment = _enum(
        errors, f"{path}.domainAttachmentType", DomainAttachmentType, p.domain_attachment_type
    )
    _enum(errors, f"{path}.downwardAPI", DownwardAPIType, p.downward_api)
    method = None
    if p.migration is not None:
        method = _enum(errors, f"{path}.migration.method", MigrationMethod, p.migration.method)
    return BindingPlugin(
        name=name,
        sidecar_image=p.sidecar_image or "",
        nad=_nad(errors, f"{path}.networkAttachmentDefinition", p.network_attachment_definition),
        attachment=attachment,
        migratable=p.migration is not None,
        link_refresh=method is MigrationMethod.LINK_REFRESH,
        overhead=_overhead(errors, f"{path}.computeResourceOverhead", p.compute_resource_overhead),
    )


def resolve_plugins(
    network: NetworkConfiguration | None, errors: list[FieldError]
) -> tuple[BindingPlugin, ...]:
    """The registered plugins (sorted by name); a FieldError in `errors` per bad field."""
    if network is None:
        return ()
    found = []
    for name in sorted(network.binding):
        if not name:
            errors.append(FieldError(path=FIELD, message="a binding plugin needs a name"))
            continue
        found.append(_plugin(errors, name, network.binding[name]))
    return tuple(found)


def plugin_of(plugins: Sequence[BindingPlugin], iface: Interface) -> BindingPlugin | None:
    """The registered plugin `iface` binds with (None: none, or a core binding)."""
    if iface.binding is None:
        return None
    return next((p for p in plugins if p.name == iface.binding.name), None)


def attached(
    plugins: Sequence[BindingPlugin], vmi: VirtualMachineInstance
) -> tuple[tuple[int, Interface, BindingPlugin], ...]:
    """(index, interface, plugin) of each interface bound by a registered, non-native plugin
    with a domainAttachmentType (the ones virt-handler wires)."""
    found = []
    for index, iface in enumerate(vmi.spec.domain.devices.interfaces):
        plugin = plugin_of(plugins, iface)
        if plugin is not None and not plugin.native and plugin.attachment is not None:
            found.append((index, iface, plugin))
    return tuple(found)


def interface_errors(
    plugins: Sequence[BindingPlugin], vmi: VirtualMachineInstance, *, prefix: str
) -> list[FieldError]:
    """Each interface whose plugin is not registered, or cannot run here (admission)."""
    errors = []
    for i, iface in enumerate(vmi.spec.domain.devices.interfaces):
        if iface.binding is None or not iface.binding.name:
            continue  # none, or refused by the model's validation
        path = f"{prefix}.domain.devices.interfaces[{i}].binding.name"
        plugin = plugin_of(plugins, iface)
        if plugin is None:
            message = (
                f"binding plugin {iface.binding.name!r} is not registered in the KubeVirt CR "
                f"({FIELD})"
            )
            errors.append(FieldError(path=path, message=message, value=iface.binding.name))
        elif (why := plugin.refusal()) is not None:
            errors.append(FieldError(path=path, message=why, value=iface.binding.name))
    return errors


def _plugin_entries(
    plugins: Sequence[BindingPlugin], vmi: VirtualMachineInstance
) -> list[dict[str, object]]:
    """One multus entry per interface whose plugin names a NAD (its CNI prepares the pod
    for it), after the interface's own network, with KubeVirt's `logicNetworkName`."""
    entries: list[dict[str, object]] = []
    namespace = vmi.metadata.namespace or "default"
    for iface in nics.present(vmi):
        plugin = plugin_of(plugins, iface)
        if plugin is None or not plugin.nad:
            continue
        ns, name = multus.split_network_name(plugin.nad, namespace=namespace)
        args = {"logicNetworkName": iface.name or ""}
        entries.append({"name": name, "namespace": ns, "cni-args": args})
    return entries


def pod_networks(plugins: Sequence[BindingPlugin], vmi: VirtualMachineInstance) -> str | None:
    """The launcher pod's `k8s.v1.cni.cncf.io/networks`: the VMI's multus networks, then its
    binding plugins' NADs (None: neither)."""
    own = multus.networks_annotation(vmi)
    extra = _plugin_entries(plugins, vmi)
    if not extra:
        return own
    entries = [*(json.loads(own) if own else []), *extra]
    return json.dumps(entries, separators=(",", ":"))


def own_networks(annotation: str | None) -> str | None:
    """A pod's networks annotation without its binding plugins' entries: what the VMI's own
    networks made (the workload updater compares that; a plugin registered later moves no
    running VMI)."""
    if not annotation:
        return annotation
    try:
        entries = json.loads(annotation)
    except ValueError:
        return annotation
    if not isinstance(entries, list):
        return annotation
    own = [e for e in entries if not (isinstance(e, dict) and "cni-args" in e)]
    if len(own) == len(entries):
        return annotation
    return json.dumps(own, separators=(",", ":")) if own else None
