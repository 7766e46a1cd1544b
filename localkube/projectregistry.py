"""The project's own images in the test bed's registry: the nodes pull virt-controller,
virt-handler and virt-launcher from it (nothing imports them into a node's containerd).

- **Names**: the manifests and the tests name ``registry.local/kubevirt-py/<image>:<tag>``;
  every node's containerd maps ``registry.local`` to this registry (a ``hosts.toml`` under
  its ``config_path``, localkube/realnode/configs.py), as a cluster maps a registry name
  to the registry that serves it. The address itself differs per cluster (a /20 each).
- **Anonymous, read-only, the project's repositories only**: a second distribution
  process (``NAME``, the gateway's ``PORT``, TLS with the registry certificate) serves a
  store holding only ``PROJECT_REPOS``, read-only and without authentication, the way
  KubeVirt's own images are public (quay.io/kubevirt). Launcher, importer, exporter and
  hot-plug pods run the launcher image in every user namespace: a pull secret would have
  to be in each, and the kubelet re-checks a pod's credentials for an image pulled with
  another pod's secret (KEP-2535). The private registry (localkube/registry.py: htpasswd,
  pull secrets) stays for users' images.
- **Content-addressed and kept**: the store lives in the build cache, one per checkout
  (``store_dir``): a session's cluster starts with what the last one pushed. An image whose
  tag already serves the archive's manifest digest is skipped; otherwise a short-lived
  writer (the same store, plain HTTP on the host's loopback, which no node or pod can
  reach) receives the blobs the store lacks and the manifest.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

import structlog
import yaml

from localkube.config import ClusterConfig
from localkube.errors import ComponentFailed
from localkube.health import log_tail, probe
from localkube.ocipush import PushTarget, archive_digest, push_archive, remote_digest
from localkube.pki import Pki
from localkube.procs import (
    DaemonSpec,
    carries_marker,
    pid_alive,
    read_pidfile,
    spawn_detached,
    stop_process,
)
from localkube.realnode.netplan import NetPlan

log = structlog.get_logger()

NAME = "registry-public"
WRITER = "registry-writer"
PORT = 5444
MIRRORED = "registry.local"
PROJECT_REPOS = frozenset(
    {"kubevirt-py/virt-controller", "kubevirt-py/virt-handler", "kubevirt-py/virt-launcher"}
)
CERT = "registry"  # localkube/registry.py's certificate (the gateway's IP as SAN)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectImage:
    """One image the registry serves: ``repo:tag`` from ``archive``."""

    repo: str
    tag: str
    archive: Path


def host(plan: NetPlan) -> str:
    return f"{plan.gateway}:{PORT}"


def served(images: tuple[tuple[str, Path], ...]) -> tuple[ProjectImage, ...]:
    """The images of the build (``<ref> <archive>`` pairs) the registry serves."""
    found = []
    for ref, archive in images:
        name, _, tag = ref.rpartition(":")
        registry, _, repo = name.partition("/")
        if registry == MIRRORED and repo in PROJECT_REPOS:
            found.append(ProjectImage(repo=repo, tag=tag, archive=archive))
    return tuple(found)


def imported(images: tuple[tuple[str, Path], ...]) -> tuple[tuple[str, Path], ...]:
    """The rest, imported into each node's containerd (the pause image, the test guest)."""
    pulled = {(f"{MIRRORED}/{i.repo}:{i.tag}", i.archive) for i in served(images)}
    return tuple(pair for pair in images if pair not in pulled)


def store_dir(config: ClusterConfig, registry_dir: Path) -> Path:
    """``<cache>/registry/projects/<checkout>``: beside the registry build (scripts/
    build-registry's ``<cache>/registry/<key>/out``), one per checkout so that two trees'
    ``:dev`` tags never meet."""
    checkout = hashlib.sha256(str(config.repo.resolve()).encode()).hexdigest()[:12]
    return registry_dir.parent.parent / "projects" / checkout


def registry_yaml(*, addr: str, root: Path, pki: Pki | None) -> str:
    """distribution's configuration without authentication: read-only over TLS (``pki``),
    or the writable loopback writer over plain HTTP (no ``pki``)."""
    storage: dict[str, object] = {"filesystem": {"rootdirectory": str(root)}}
    http: dict[str, object] = {"addr": addr, "secret": secrets.token_urlsafe(24)}
    if pki is not None:
        storage["maintenance"] = {"readonly": {"enabled": True}}
        http["tls"] = {"certificate": str(pki.crt(CERT)), "key": str(pki.key(CERT))}
    config = {
        "version": 0.1,
        "log": {"level": "warn", "formatter": "text"},
        "storage": storage,
        "http": http,
    }
    return yaml.safe_dump(config, sort_keys=False)


class ProjectRegistry:
    """Start (idempotent) the anonymous read-only registry, and fill its store."""

    def __init__(
        self, *, config: ClusterConfig, plan: NetPlan, registry_dir: Path, state: Path
    ) -> None:
        self.config = config
        self.plan = plan
        self.bin = registry_dir / "registry"
        self.store = store_dir(config, registry_dir)
        self.state = state  # localkube/registry.py's directory in the cluster state
        self.pki = Pki(config.paths.pki)

    def spec(self, name: str) -> DaemonSpec:
        paths = self.config.paths
        return DaemonSpec(
            name=name,
            argv=(str(self.bin), "serve", str(self.state / f"{name}.yml")),
            log_file=paths.log(name),
            pidfile=paths.pidfile(name),
            env={"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"},
        )

    def start(self, *, marker: tuple[str, str]) -> None:
        """The read-only server on the gateway (after the registry's certificate exists)."""
        pid = read_pidfile(self.spec(NAME).pidfile)
        if pid is not None and carries_marker(pid, marker):
            return
        self.store.mkdir(parents=True, exist_ok=True)
        yml = registry_yaml(addr=host(self.plan), root=self.store, pki=self.pki)
        (self.state / f"{NAME}.yml").write_text(yml)
        spawn_detached(self.spec(NAME), marker=marker)

    async def publish(self, *, marker: tuple[str, str]) -> dict[str, str]:
        """Every project image served under its tag; ``{ref: manifest digest}``."""
        images = served(self.config.images)
        await self._wait(NAME, f"https://{host(self.plan)}/v2/", secure=True)
        async with asyncio.timeout(120):
            found = await asyncio.gather(*(asyncio.to_thread(self._serving, i) for i in images))
        todo = [(image, digest) for image, digest, serving in found if not serving]
        if todo:
            await self._push(todo, marker=marker)
        log.info("project_images_served", host=host(self.plan), pushed=len(todo),
                 kept=len(images) - len(todo))  # fmt: skip
        return {f"{MIRRORED}/{image.repo}:{image.tag}": digest for image, digest, _ in found}

    def _serving(self, image: ProjectImage) -> tuple[ProjectImage, str, bool]:
        """(image, the archive's manifest digest, whether the tag serves it already)."""
        digest = archive_digest(image.archive)
        target = PushTarget(host=host(self.plan), repo=image.repo, tag=image.tag,
                            ca_file=self.pki.crt("ca"))  # fmt: skip
        return image, digest, remote_digest(target) == digest

    async def _push(self, todo: list[tuple[ProjectImage, str]], *, marker: tuple[str, str]) -> None:
        """Through a writer on loopback (the same store), stopped afterwards."""
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            addr = f"127.0.0.1:{s.getsockname()[1]}"
        (self.state / f"{WRITER}.yml").write_text(
            registry_yaml(addr=addr, root=self.store, pki=None)
        )
        pid = spawn_detached(self.spec(WRITER), marker=marker)
        try:
            await self._wait(WRITER, f"http://{addr}/v2/", secure=False)
            async with asyncio.timeout(600):
                for image, digest in todo:
                    target = PushTarget(host=addr, repo=image.repo, tag=image.tag)
                    await asyncio.to_thread(push_archive, image.archive, target, label=None)
                    log.info("project_image_pushed", repo=image.repo, digest=digest)
        finally:
            await stop_process(pid, marker=marker, grace=10)

    async def _wait(self, name: str, url: str, *, secure: bool, timeout: float = 60) -> None:
        """Until /v2/ answers 200 (anonymous access)."""
        ctx = ssl.create_default_context(cafile=str(self.pki.crt("ca"))) if secure else False
        spec = self.spec(name)
        loop = asyncio.get_running_loop()
        deadline, last = loop.time() + timeout, (0, "no answer yet")
        while loop.time() < deadline:
            last = await probe(url, ssl_ctx=ctx)
            if last[0] == 200:
                return
            pid = read_pidfile(spec.pidfile)
            if pid is None or not pid_alive(pid):
                raise ComponentFailed(name, "exited while starting", log_tail(spec.log_file))
            await asyncio.sleep(0.2)
        raise ComponentFailed(name, f"{url}: no 200 after {timeout}s; last {last}",
                              log_tail(spec.log_file))  # fmt: skip
