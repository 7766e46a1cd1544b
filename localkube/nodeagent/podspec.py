"""A typed view of the parts of a Pod the node agent acts on, parsed from the wire dict.

Volume sources and env entries stay as the API's dicts (``Mapping``): they are many
small variants consumed in exactly one place each (volumes.py, env.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

DEFAULT_GRACE = 30


class RestartPolicy(StrEnum):
    ALWAYS = "Always"
    ON_FAILURE = "OnFailure"
    NEVER = "Never"

    def restarts(self, exit_code: int) -> bool:
        return self is RestartPolicy.ALWAYS or (self is RestartPolicy.ON_FAILURE and exit_code != 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeMount:
    name: str
    mount_path: str
    read_only: bool
    sub_path: str
    sub_path_expr: str  # $(VAR) references expanded with the container's env


@dataclass(frozen=True, slots=True, kw_only=True)
class Container:
    name: str
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    working_dir: str
    env: tuple[Mapping[str, Any], ...]
    env_from: tuple[Mapping[str, Any], ...]
    mounts: tuple[VolumeMount, ...]
    resources: Mapping[str, Any]

    @classmethod
    def from_dict(cls, c: Mapping[str, Any]) -> Container:
        mounts = tuple(
            VolumeMount(
                name=m["name"],
                mount_path=m["mountPath"],
                read_only=bool(m.get("readOnly")),
                sub_path=m.get("subPath", ""),
                sub_path_expr=m.get("subPathExpr", ""),
            )
            for m in c.get("volumeMounts") or ()
        )
        return cls(
            name=c["name"],
            image=c.get("image", ""),
            command=tuple(c.get("command") or ()),
            args=tuple(c.get("args") or ()),
            working_dir=c.get("workingDir") or "/",
            env=tuple(c.get("env") or ()),
            env_from=tuple(c.get("envFrom") or ()),
            mounts=mounts,
            resources=c.get("resources") or {},
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Pod:
    """One snapshot of a pod bound to this node."""

    uid: str
    name: str
    namespace: str
    node: str
    service_account: str
    restart_policy: RestartPolicy
    grace_seconds: int
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...]
    volumes: tuple[Mapping[str, Any], ...]
    deleting: bool
    deletion_grace: int | None
    raw: Mapping[str, Any]

    @classmethod
    def from_dict(cls, pod: Mapping[str, Any]) -> Pod:
        meta, spec = pod["metadata"], pod.get("spec", {})
        grace = meta.get("deletionGracePeriodSeconds")
        return cls(
            uid=meta["uid"],
            name=meta["name"],
            namespace=meta["namespace"],
            node=spec.get("nodeName", ""),
            service_account=spec.get("serviceAccountName") or "default",
            restart_policy=RestartPolicy(spec.get("restartPolicy", "Always")),
            grace_seconds=int(spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE)),
            containers=tuple(Container.from_dict(c) for c in spec.get("containers", ())),
            init_containers=tuple(Container.from_dict(c) for c in spec.get("initContainers") or ()),
            volumes=tuple(spec.get("volumes") or ()),
            deleting=meta.get("deletionTimestamp") is not None,
            deletion_grace=int(grace) if grace is not None else None,
            raw=pod,
        )

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def phase(self) -> str:
        return str(self.raw.get("status", {}).get("phase", "Pending"))

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    def api_status(self, name: str, *, init: bool = False) -> Mapping[str, Any]:
        """The container's status as the API last recorded it ({} if none)."""
        key = "initContainerStatuses" if init else "containerStatuses"
        for st in self.raw.get("status", {}).get(key) or ():
            if st.get("name") == name:
                return dict(st)
        return {}
