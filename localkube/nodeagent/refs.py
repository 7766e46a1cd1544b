"""What a pod's env and volumes refer to: ConfigMaps, Secrets and downward-API fields.

The Node authorizer lets a node read exactly the ConfigMaps and Secrets its pods
reference, so these are fetched with the node's own credentials, once per pod start.
"""

from __future__ import annotations

import base64
import hashlib
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from localkube.errors import LocalKubeError
from localkube.nodeagent.kube import JSON, Kube, KubeError
from localkube.nodeagent.podspec import Pod

HOST_IP = "127.0.0.1"


def pod_ip(uid: str) -> str:
    """Each pod's own loopback address (127.x.y.z from its UID), so pods sharing the host
    network can still each bind their ports, as pods with their own IPs do."""
    digest = hashlib.sha256(uid.encode()).digest()
    return f"127.{digest[0] % 254 + 1}.{digest[1]}.{digest[2] % 254 + 1}"


_SUFFIX = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "m": 1e-3,
    "": 1,
}
_LABEL = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


class ConfigError(LocalKubeError):
    """A referenced object or key is missing: the container waits (CreateContainerConfigError)."""


class Refs:
    """Fetches the ConfigMaps and Secrets of one pod's namespace, each once."""

    def __init__(self, kube: Kube, pod: Pod) -> None:
        self._kube = kube
        self._pod = pod
        self._cache: dict[tuple[str, str], JSON | None] = {}

    async def _get(self, kind: str, name: str) -> JSON | None:
        if (kind, name) not in self._cache:
            try:
                obj = await self._kube.get(
                    f"/api/v1/namespaces/{self._pod.namespace}/{kind}/{name}"
                )
            except KubeError as e:
                if e.status != 404:
                    raise
                obj = None
            self._cache[kind, name] = obj
        return self._cache[kind, name]

    async def data(self, kind: str, name: str, *, optional: bool) -> dict[str, bytes]:
        """All keys of a configmap or secret (``kind`` is the plural resource) as bytes."""
        obj = await self._get(kind, name)
        if obj is None:
            if optional:
                return {}
            raise ConfigError(f'{kind[:-1]} "{name}" not found')
        out: dict[str, bytes] = {}
        if kind == "secrets":
            for k, v in (obj.get("data") or {}).items():
                out[k] = base64.b64decode(v)
        else:
            out.update({k: v.encode() for k, v in (obj.get("data") or {}).items()})
            out.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
        return out

    async def key(self, kind: str, ref: Mapping[str, Any]) -> str | None:
        data = await self.data(kind, ref["name"], optional=bool(ref.get("optional")))
        if ref["key"] not in data:
            if ref.get("optional"):
                return None
            raise ConfigError(f'key "{ref["key"]}" not found in {kind[:-1]} "{ref["name"]}"')
        return data[ref["key"]].decode(errors="replace")


def field_value(pod: Pod, path: str) -> str:
    """A downward-API fieldRef value."""
    meta, spec = pod.raw["metadata"], pod.raw.get("spec", {})
    simple = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta["namespace"],
        "metadata.uid": meta["uid"],
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": pod_ip(meta["uid"]),
        "status.podIPs": pod_ip(meta["uid"]),
        "status.hostIP": HOST_IP,
        "status.hostIPs": HOST_IP,
    }
    if path in simple:
        return str(simple[path])
    if m := _LABEL.match(path):
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    if path in ("metadata.labels", "metadata.annotations"):
        items = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(items.items()))
    raise ConfigError(f"unsupported fieldRef {path!r}")


def quantity(text: str) -> float:
    m = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(text).strip())
    if not m or m.group(2) not in _SUFFIX:
        raise ConfigError(f"bad quantity {text!r}")
    return float(m.group(1)) * _SUFFIX[m.group(2)]


def resource_value(pod: Pod, container: str, ref: Mapping[str, Any]) -> str:
    """A resourceFieldRef value; unset limits fall back to the machine, like a kubelet."""
    name = ref.get("containerName") or container
    spec = next((c for c in (*pod.containers, *pod.init_containers) if c.name == name), None)
    section, _, resource = ref["resource"].partition(".")
    value = (spec.resources.get(section) or {}).get(resource) if spec else None
    if value is None:
        value = str(os.cpu_count() or 1) if resource == "cpu" else _mem_bytes()
    divisor = quantity(ref.get("divisor", "1"))
    return str(math.ceil(quantity(value) / divisor))


def _mem_bytes() -> str:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return str(int(line.split()[1]) * 1024)
    return "0"
