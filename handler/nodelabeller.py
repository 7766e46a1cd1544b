"""The node labeller (KubeVirt's): labels this handler's Node with the CPU models, features
and host model its libvirt offers, so the controller can select nodes for `cpu.model` and
`cpu.features` (shared/cpulabels.py holds the keys).

Its input is what the `qemu-capabilities` init container wrote with the launcher image's
libvirt (launcher/nodecpu.py): domcapabilities and the expanded host-model CPU. Labels:

- `cpu-model.node.kubevirt.io/<m>` and `cpu-model-migration.node.kubevirt.io/<m>` for each
  custom model libvirt reports `usable='yes'`, but the obsolete ones (the KubeVirt CR's
  obsoleteCPUModels, else KubeVirt's default list);
- `cpu-feature.node.kubevirt.io/<f>` for each feature the expanded host-model requires;
- `host-model-cpu.node.kubevirt.io/<model>`, `host-model-required-features...<f>` (the
  host-model mode's required features), `cpu-vendor.node.kubevirt.io/<vendor>`, the host
  model's migration label (or `node-labeller.kubevirt.io/obsolete-host-model`).

Every round (at start, each interval, and when the KubeVirt CR changes) it reads the
documents again and the Node's labels, and patches only the difference: new keys set, stale
keys of its prefixes removed, no other label touched (a merge patch on its own Node, which
node restriction allows).
"""

from __future__ import annotations

import asyncio
import contextlib
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import structlog

from shared import cpulabels
from shared.kube import KubeError

log = structlog.get_logger("handler.nodelabeller")

TRUE = "true"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeCPU:
    """What libvirt offers guests' CPUs on this node."""

    models: tuple[str, ...] = ()  # usable custom models
    host_model: str | None = None
    vendor: str | None = None
    host_model_required: tuple[str, ...] = ()  # host-model mode's required features
    features: tuple[str, ...] = ()  # the expanded host-model's required features


def _required(parent: ET.Element | None) -> tuple[str, ...]:
    if parent is None:
        return ()
    found = (f.get("name") or "" for f in parent.findall("feature") if f.get("policy") == "require")
    return tuple(sorted({name for name in found if name}))


def parse(domcaps: str, features: str | None) -> NodeCPU:
    """The two documents (features may be absent) as a NodeCPU; ET.ParseError if malformed."""
    cpu = ET.fromstring(domcaps).find("cpu")
    if cpu is None:
        return NodeCPU()
    custom = cpu.find("mode[@name='custom']")
    models = () if custom is None else tuple(
        (m.text or "").strip() for m in custom.findall("model") if m.get("usable") == "yes"
    )  # fmt: skip
    host = cpu.find("mode[@name='host-model']")
    if host is not None and host.get("supported") == "no":
        host = None
    host_name = None if host is None else (host.findtext("model") or "").strip() or None
    vendor = None if host is None else (host.findtext("vendor") or "").strip() or None
    expanded = ET.fromstring(features) if features else None
    return NodeCPU(
        models=tuple(m for m in models if m),
        host_model=host_name,
        vendor=vendor,
        host_model_required=_required(host),
        features=_required(expanded),
    )


def node_labels(cpu: NodeCPU, *, obsolete: frozenset[str]) -> dict[str, str]:
    """The labels the Node should carry (names a label key cannot hold are left out)."""
    p = cpulabels
    pairs: list[tuple[str, str]] = []
    for model in cpu.models:
        if model not in obsolete:
            pairs += [(p.CPU_MODEL_PREFIX, model), (p.CPU_MODEL_MIGRATION_PREFIX, model)]
    pairs += [(p.CPU_FEATURE_PREFIX, f) for f in cpu.features]
    pairs += [(p.HOST_MODEL_FEATURES_PREFIX, f) for f in cpu.host_model_required]
    if cpu.vendor:
        pairs.append((p.CPU_VENDOR_PREFIX, cpu.vendor))
    labels = {prefix + name: TRUE for prefix, name in pairs if p.valid_name(name)}
    host = cpu.host_model
    if host and p.valid_name(host):
        labels[p.HOST_MODEL_CPU_PREFIX + host] = TRUE
        if host in obsolete:
            labels[p.OBSOLETE_HOST_MODEL_LABEL] = TRUE
        else:
            labels[p.CPU_MODEL_MIGRATION_PREFIX + host] = TRUE
    return labels


def label_patch(current: Mapping[str, str], desired: Mapping[str, str]) -> dict[str, Any] | None:
    """The merge patch taking the Node's labels of our prefixes to `desired` (stale ones
    null, so removed); None when they already are."""
    changes: dict[str, str | None] = {k: v for k, v in desired.items() if current.get(k) != v}
    changes.update({k: None for k in current if cpulabels.owned(k) and k not in desired})
    if not changes:
        return None
    return {"metadata": {"labels": dict(sorted(changes.items()))}}


def read_labels(directory: Path, *, obsolete: frozenset[str]) -> dict[str, str] | None:
    """The labels the documents in `directory` call for; None when there are none yet."""
    try:
        domcaps = (directory / cpulabels.DOMCAPS_FILE).read_text()
    except FileNotFoundError:
        return None
    features_file = directory / cpulabels.FEATURES_FILE
    features = features_file.read_text() if features_file.exists() else None
    return node_labels(parse(domcaps, features), obsolete=obsolete)


class NodeLabelsApi(Protocol):
    async def node_labels(self, name: str) -> dict[str, str]: ...

    async def patch_node(self, name: str, patch: Mapping[str, Any]) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class LabellerConfig:
    directory: Path  # the init container's documents (cpulabels.NODE_CPU_DIR)
    interval: float = 180.0  # KubeVirt's: every 3 minutes


def _default_obsolete() -> frozenset[str]:
    return cpulabels.DEFAULT_OBSOLETE_MODELS


class NodeLabeller:
    """Keeps the Node's CPU labels equal to what the documents say; `obsolete`: the
    KubeVirt CR's obsoleteCPUModels in force (read each round; `poke` when it changes)."""

    def __init__(
        self,
        api: NodeLabelsApi,
        *,
        node: str,
        config: LabellerConfig,
        obsolete: Callable[[], frozenset[str]] = _default_obsolete,
    ) -> None:
        self._api = api
        self._node = node
        self._config = config
        self._obsolete = obsolete
        self._poke = asyncio.Event()
        self.patches = 0

    def poke(self) -> None:
        """Relabel now (the cluster configuration changed), not at the next interval."""
        self._poke.set()

    async def sync(self) -> None:
        """One round: read, compare, patch the difference (KubeError, OSError, ParseError)."""
        desired = read_labels(self._config.directory, obsolete=self._obsolete())
        if desired is None:
            log.warning("node_cpu_documents_missing", directory=str(self._config.directory))
            return
        patch = label_patch(await self._api.node_labels(self._node), desired)
        if patch is None:
            return
        await self._api.patch_node(self._node, patch)
        self.patches += 1
        changed = patch["metadata"]["labels"]
        removed = sum(1 for v in changed.values() if v is None)
        log.info("node_labelled", labels=len(desired), set=len(changed) - removed, removed=removed)

    async def run(self) -> None:
        """A round now, then one per interval; a failed round is logged and retried."""
        while True:
            try:
                await self.sync()
            except (KubeError, OSError, ET.ParseError) as e:
                log.warning("node_labelling_failed", error=str(e))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._config.interval):
                    await self._poke.wait()
            self._poke.clear()
