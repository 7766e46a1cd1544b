"""A container's environment, built as a kubelet builds it.

Order: the node's base variables (PATH, KUBERNETES_SERVICE_*), then envFrom, then env
(later entries win); ``$(VAR)`` references expand against what is defined so far.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from localkube.nodeagent.config import POD_ENV_MARKER, AgentConfig
from localkube.nodeagent.podspec import Container, Pod
from localkube.nodeagent.refs import Refs, field_value, resource_value

_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: unknown references stay as written, $$ escapes."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _REF.sub(sub, text)


def base_env(cfg: AgentConfig, pod: Pod, *, api: tuple[str, int]) -> dict[str, str]:
    host, port = api
    return {
        "PATH": f"{cfg.python.parent}:{SYSTEM_PATH}",
        "HOME": "/root",
        "HOSTNAME": pod.name,
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(cfg.repo),
        "PYTHONUNBUFFERED": "1",
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": str(port),
        "KUBERNETES_SERVICE_PORT_HTTPS": str(port),
        "KUBERNETES_PORT": f"tcp://{host}:{port}",
        f"KUBERNETES_PORT_{port}_TCP": f"tcp://{host}:{port}",
        cfg.marker[0]: cfg.marker[1],
        POD_ENV_MARKER: pod.uid,
    }


async def container_env(
    refs: Refs, pod: Pod, container: Container, *, base: Mapping[str, str]
) -> dict[str, str]:
    env = dict(base)
    for source in container.env_from:
        prefix = source.get("prefix", "")
        for kind, key in (("configmaps", "configMapRef"), ("secrets", "secretRef")):
            if ref := source.get(key):
                data = await refs.data(kind, ref["name"], optional=bool(ref.get("optional")))
                env.update({prefix + k: v.decode(errors="replace") for k, v in data.items()})
    for entry in container.env:
        value = await _value(refs, pod, container, entry, env)
        if value is not None:
            env[entry["name"]] = value
    return env


async def _value(
    refs: Refs, pod: Pod, container: Container, entry: Mapping[str, object], env: Mapping[str, str]
) -> str | None:
    source = entry.get("valueFrom")
    if "value" in entry or not isinstance(source, Mapping):
        return expand(str(entry.get("value", "")), env)
    if "fieldRef" in source:
        return field_value(pod, source["fieldRef"]["fieldPath"])
    if "resourceFieldRef" in source:
        return resource_value(pod, container.name, source["resourceFieldRef"])
    for kind, key in (("configmaps", "configMapKeyRef"), ("secrets", "secretKeyRef")):
        if key in source:
            return await refs.key(kind, source[key])
    return ""
