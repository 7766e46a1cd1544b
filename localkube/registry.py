"""The real-node test bed's private OCI registry: distribution's ``registry``
(scripts/build-registry, the Go module github.com/distribution/distribution/v3) serving
HTTPS with a certificate of the cluster CA and htpasswd (bcrypt) authentication, so images
are pulled the way users pull from a private registry: with a pull secret.

- **Where**: the cluster bridge's gateway (the host's address on the node network, where
  kube-apiserver listens too) on port ``PORT``: nodes dial it from their namespaces, pods
  through their node; another cluster's registry binds its own block's gateway.
- **Trust**: every node's containerd reads ``certs.d/<host:port>/hosts.toml`` (its
  ``config_path``; localkube/realnode/configs.py) naming the cluster CA for that host.
  Credentials are not configured on the nodes: a pull without a pull secret is refused.
- **Credentials**: user ``USER`` with a random password, kept in the state dir
  (``registry/credentials.json``, 0600); ``endpoint()`` reads them for tests and docs.
- **Content**: the test guest (``GUEST_REF``, from scripts/build-images' archive) is pushed
  as ``<host:port>/kubevirt-py/tiny-guest:v1`` at start (localkube/ocipush.py), its config
  labelled (``LABEL``) so it is an image of its own: the kubelet (KEP-2535, on in 1.36)
  records which credentials pulled an image ID and re-pulls an image whose ID was pulled
  with a secret for pods without it: the imported original must stay apart.
- **The project's images**: served beside it, anonymously and read-only, by a second
  process over a store of their own (localkube/projectregistry.py); the nodes pull them.
- **Lifetime**: a detached process carrying the cluster's marker: ``Cluster.down`` stops it
  and reaps it with the rest (a SIGTERMed test session too).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import ssl
from dataclasses import dataclass
from pathlib import Path

import structlog
import yaml

from localkube.config import ClusterConfig
from localkube.errors import ComponentFailed
from localkube.health import log_tail, probe
from localkube.ocipush import PushTarget, push_archive
from localkube.pki import CertSpec, Pki
from localkube.procs import DaemonSpec, carries_marker, pid_alive, read_pidfile, spawn_detached
from localkube.projectregistry import ProjectRegistry
from localkube.realnode.netplan import NetPlan

log = structlog.get_logger()

NAME = "registry"
PORT = 5443
USER = "kubevirt-py"
CERT = "registry"
GUEST_REF = "registry.local/kubevirt-py/tiny-guest:v1"
GUEST_REPO = "kubevirt-py/tiny-guest"
GUEST_TAG = "v1"
# On the pushed image's config: its own image ID, apart from the imported original's (the
# kubelet remembers which credentials pulled an image ID and re-verifies others' use of it).
LABEL = ("io.kubevirt-py.test-bed", "private-registry")


@dataclass(frozen=True, slots=True, kw_only=True)
class RegistryEndpoint:
    """How clients reach the registry: ``host`` is ``<address>:<port>``."""

    host: str
    username: str
    password: str
    ca_file: Path

    def image(self, repo: str = GUEST_REPO, tag: str = GUEST_TAG) -> str:
        return f"{self.host}/{repo}:{tag}"

    def docker_config(self) -> dict[str, object]:
        """A ``.dockerconfigjson`` for a kubernetes.io/dockerconfigjson pull secret."""
        auth = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        entry = {"username": self.username, "password": self.password, "auth": auth}
        return {"auths": {self.host: entry}}


def host(plan: NetPlan) -> str:
    """The registry's ``host:port`` in a cluster of this address plan."""
    return f"{plan.gateway}:{PORT}"


def _dir(config: ClusterConfig) -> Path:
    return config.paths.root / NAME


def _credentials(config: ClusterConfig) -> tuple[str, str]:
    """(user, password): made once per cluster state dir, then kept."""
    path = _dir(config) / "credentials.json"
    try:
        data = json.loads(path.read_text())
        return str(data["username"]), str(data["password"])
    except (OSError, ValueError, KeyError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(18)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"username": USER, "password": password}, f)
    return USER, password


def endpoint(config: ClusterConfig, plan: NetPlan) -> RegistryEndpoint:
    """The registry of this cluster, with its credentials."""
    user, password = _credentials(config)
    return RegistryEndpoint(
        host=host(plan), username=user, password=password, ca_file=Pki(config.paths.pki).crt("ca")
    )


def registry_yaml(*, addr: str, root: Path, pki: Pki, htpasswd: Path, secret: str) -> str:
    """distribution's configuration: filesystem storage, TLS, htpasswd, no debug server."""
    config = {
        "version": 0.1,
        "log": {"level": "info", "formatter": "text"},
        "storage": {"filesystem": {"rootdirectory": str(root)}, "delete": {"enabled": True}},
        "http": {
            "addr": addr,
            "secret": secret,
            "tls": {"certificate": str(pki.crt(CERT)), "key": str(pki.key(CERT))},
        },
        "auth": {"htpasswd": {"realm": "kubevirt-py-test-bed", "path": str(htpasswd)}},
    }
    return yaml.safe_dump(config, sort_keys=False)


class LocalRegistry:
    """Start (idempotent), wait for, fill and stop one cluster's registry."""

    def __init__(self, *, config: ClusterConfig, plan: NetPlan, marker: tuple[str, str]) -> None:
        if config.registry_dir is None:
            raise ComponentFailed(NAME, "no registry build (scripts/build-registry)")
        self.config = config
        self.plan = plan
        self.marker = marker
        self.bin_dir = config.registry_dir
        self.pki = Pki(config.paths.pki)
        self.projects = ProjectRegistry(
            config=config, plan=plan, registry_dir=config.registry_dir, state=_dir(config)
        )

    @property
    def spec(self) -> DaemonSpec:
        paths = self.config.paths
        return DaemonSpec(
            name=NAME,
            argv=(str(self.bin_dir / "registry"), "serve", str(_dir(self.config) / "config.yml")),
            log_file=paths.log(NAME),
            pidfile=paths.pidfile(NAME),
            env={"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"},
        )

    def running(self) -> bool:
        pid = read_pidfile(self.spec.pidfile)
        return pid is not None and carries_marker(pid, self.marker)

    async def start(self) -> None:
        """Certificate, htpasswd and configuration written; the process started; then the
        project's anonymous read-only registry (localkube/projectregistry.py)."""
        if not self.running():
            await self._start_private()
        self.projects.start(marker=self.marker)

    async def _start_private(self) -> None:
        root = _dir(self.config)
        sans = (f"IP:{self.plan.gateway}",)
        await self.pki.ensure_cert(
            CertSpec(name=CERT, cn="kubevirt-py-registry", server=True, sans=sans), ca="ca"
        )
        user, password = _credentials(self.config)
        htpasswd = root / "htpasswd"
        htpasswd.write_text(await self._htpasswd(user, password))
        (root / "config.yml").write_text(
            registry_yaml(
                addr=host(self.plan),
                root=root / "data",
                pki=self.pki,
                htpasswd=htpasswd,
                secret=secrets.token_urlsafe(24),
            )
        )
        spawn_detached(self.spec, marker=self.marker)

    async def publish(self) -> dict[str, str]:
        """The project's images served (pushed where the store lacks them): {ref: digest}."""
        return await self.projects.publish(marker=self.marker)

    async def _htpasswd(self, user: str, password: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            str(self.bin_dir / "htpasswd"),
            user,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(30):
            out, err = await proc.communicate(f"{password}\n".encode())
        if proc.returncode != 0:
            raise ComponentFailed(NAME, f"htpasswd exited {proc.returncode}: {err.decode()}")
        return out.decode()

    async def serve_guest(self) -> None:
        """Serving, with the test guest pushed."""
        await self.wait_serving()
        await self.push_guest()

    async def wait_serving(self, timeout: float = 60.0) -> None:
        """Until /v2/ answers 401 (up, asking for credentials) over TLS with the CA."""
        ctx = ssl.create_default_context(cafile=str(self.pki.crt("ca")))
        url = f"https://{host(self.plan)}/v2/"
        loop = asyncio.get_running_loop()
        deadline, last = loop.time() + timeout, (0, "no answer yet")
        while loop.time() < deadline:
            last = await probe(url, ssl_ctx=ctx)
            if last[0] == 401:
                log.info("registry_serving", host=host(self.plan))
                return
            pid = read_pidfile(self.spec.pidfile)
            if pid is None or not pid_alive(pid):
                raise ComponentFailed(NAME, "exited while starting", log_tail(self.spec.log_file))
            await asyncio.sleep(0.3)
        raise ComponentFailed(
            NAME, f"{url}: no 401 after {timeout}s; last {last}", log_tail(self.spec.log_file)
        )

    async def push_guest(self) -> None:
        """The test guest's archive pushed as kubevirt-py/tiny-guest:v1 (blobs the registry
        has are skipped, so a second start costs one manifest PUT)."""
        archives = [a for ref, a in self.config.images if ref == GUEST_REF]
        if not archives:
            raise ComponentFailed(NAME, f"no {GUEST_REF} among the cluster's images to push")
        ep = endpoint(self.config, self.plan)
        target = PushTarget(
            host=ep.host, repo=GUEST_REPO, tag=GUEST_TAG,
            username=ep.username, password=ep.password, ca_file=ep.ca_file,
        )  # fmt: skip
        async with asyncio.timeout(300):
            digest = await asyncio.to_thread(push_archive, archives[0], target, label=LABEL)
        log.info("registry_image_pushed", image=ep.image(), digest=digest)
