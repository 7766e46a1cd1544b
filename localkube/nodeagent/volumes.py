"""Pod volumes on the host, laid out as a kubelet lays them out.

``<root>/<node>/pods/<podUID>/volumes/kubernetes.io~<plugin>/<name>``; containers see
them bind-mounted at their mountPaths (runtime.py). Supported: emptyDir, hostPath,
configMap, secret, downwardAPI and projected (serviceAccountToken, configMap, secret,
downwardAPI). Anything else stops the pod in ContainerCreating with a clear message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from localkube.nodeagent.kube import Kube
from localkube.nodeagent.podspec import Pod
from localkube.nodeagent.refs import ConfigError, Refs, field_value, resource_value

DEFAULT_TOKEN_SECONDS = 3600


class VolumeError(ConfigError):
    """A volume cannot be set up (unsupported type, failed hostPath type check, ...)."""


async def prepare_volumes(kube: Kube, refs: Refs, pod: Pod, pod_dir: Path) -> dict[str, Path]:
    """Create every volume of the pod; return volume name → host path."""
    paths: dict[str, Path] = {}
    for vol in pod.volumes:
        name = vol["name"]
        if "emptyDir" in vol:
            paths[name] = _dir(pod_dir / "volumes" / "kubernetes.io~empty-dir" / name)
        elif "hostPath" in vol:
            paths[name] = _host_path(vol["hostPath"])
        elif "configMap" in vol:
            src = vol["configMap"]
            files = await _keys(refs, "configmaps", src, src["name"])
            paths[name] = _write(pod_dir, "configmap", name, files, src.get("defaultMode"))
        elif "secret" in vol:
            src = vol["secret"]
            files = await _keys(refs, "secrets", src, src["secretName"])
            paths[name] = _write(pod_dir, "secret", name, files, src.get("defaultMode"))
        elif "downwardAPI" in vol:
            src = vol["downwardAPI"]
            files = _downward(pod, src.get("items") or ())
            paths[name] = _write(pod_dir, "downward-api", name, files, src.get("defaultMode"))
        elif "projected" in vol:
            src = vol["projected"]
            files = await _projected(kube, refs, pod, src.get("sources") or ())
            paths[name] = _write(pod_dir, "projected", name, files, src.get("defaultMode"))
        else:
            kinds = sorted(set(vol) - {"name"})
            raise VolumeError(f"volume {name!r}: type {kinds} is not supported by localkube")
    return paths


def _dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _host_path(src: Mapping[str, Any]) -> Path:
    path, kind = Path(src["path"]), src.get("type", "")
    if kind == "DirectoryOrCreate":
        path.mkdir(parents=True, exist_ok=True, mode=0o755)
    elif kind == "FileOrCreate" and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o644)
    checks = {
        "Directory": path.is_dir,
        "File": path.is_file,
        "Socket": path.is_socket,
        "CharDevice": path.is_char_device,
        "BlockDevice": path.is_block_device,
    }
    if kind in checks and not checks[kind]():
        raise VolumeError(f"hostPath type check failed: {path} is not a {kind}")
    return path


async def _keys(
    refs: Refs, kind: str, src: Mapping[str, Any], name: str
) -> dict[str, tuple[bytes, int | None]]:
    data = await refs.data(kind, name, optional=bool(src.get("optional")))
    items = src.get("items")
    if not items:
        return {k: (v, None) for k, v in data.items()}
    out: dict[str, tuple[bytes, int | None]] = {}
    for item in items:
        if item["key"] not in data:
            if src.get("optional"):
                continue
            raise ConfigError(f'key "{item["key"]}" not found in {kind[:-1]} "{name}"')
        out[item["path"]] = (data[item["key"]], item.get("mode"))
    return out


def _downward(pod: Pod, items: Any) -> dict[str, tuple[bytes, int | None]]:
    out: dict[str, tuple[bytes, int | None]] = {}
    for item in items:
        if "fieldRef" in item:
            value = field_value(pod, item["fieldRef"]["fieldPath"])
        else:
            ref = item["resourceFieldRef"]
            value = resource_value(pod, ref.get("containerName", ""), ref)
        out[item["path"]] = (value.encode(), item.get("mode"))
    return out


async def _projected(
    kube: Kube, refs: Refs, pod: Pod, sources: Any
) -> dict[str, tuple[bytes, int | None]]:
    out: dict[str, tuple[bytes, int | None]] = {}
    for source in sources:
        if "serviceAccountToken" in source:
            sat = source["serviceAccountToken"]
            token = await request_token(kube, pod, sat)
            out[sat["path"]] = (token.encode(), None)
        elif "configMap" in source:
            cm = source["configMap"]
            out.update(await _keys(refs, "configmaps", cm, cm["name"]))
        elif "secret" in source:
            sec = source["secret"]
            out.update(await _keys(refs, "secrets", sec, sec["name"]))
        elif "downwardAPI" in source:
            out.update(_downward(pod, source["downwardAPI"].get("items") or ()))
        else:
            raise VolumeError(f"projected source {sorted(source)} is not supported by localkube")
    return out


async def request_token(kube: Kube, pod: Pod, sat: Mapping[str, Any]) -> str:
    """A TokenRequest bound to the pod, as the kubelet makes for projected tokens."""
    spec: dict[str, Any] = {
        "expirationSeconds": int(sat.get("expirationSeconds", DEFAULT_TOKEN_SECONDS)),
        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid},
    }
    if sat.get("audience"):
        spec["audiences"] = [sat["audience"]]
    path = f"/api/v1/namespaces/{pod.namespace}/serviceaccounts/{pod.service_account}/token"
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
    answer = await kube.request("POST", path, body=body)
    return str(answer["status"]["token"])


def _write(
    pod_dir: Path,
    plugin: str,
    name: str,
    files: Mapping[str, tuple[bytes, int | None]],
    default_mode: int | None,
) -> Path:
    root = _dir(pod_dir / "volumes" / f"kubernetes.io~{plugin}" / name)
    for rel, (content, mode) in files.items():
        target = root / rel
        if root not in target.resolve().parents:
            raise VolumeError(f"volume {name!r}: path {rel!r} escapes the volume")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_bytes(content)
        os.chmod(tmp, mode if mode is not None else (default_mode or 0o644))
        tmp.replace(target)
    return root
