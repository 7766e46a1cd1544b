"""The project's images in the test bed's registry: which images it serves and which are
still imported, the nodes mapping registry.local to it, distribution's anonymous read-only
configuration and its loopback writer, the per-checkout store, and the push client's
byte-for-byte push (its digest is the archive's) over plain HTTP without credentials."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import tarfile
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from localkube import projectregistry
from localkube.config import ClusterConfig, NodeKind
from localkube.ocipush import PushTarget, archive_digest, push_archive, remote_digest
from localkube.pki import Pki
from localkube.realnode.fleet import Fleet
from localkube.realnode.netplan import NetPlan

IMAGES = (
    ("registry.local/kubevirt-py/pause:3.10", Path("/a/pause.tar")),
    ("registry.local/kubevirt-py/virt-controller:dev", Path("/a/c.tar")),
    ("registry.local/kubevirt-py/virt-handler:dev", Path("/a/h.tar")),
    ("registry.local/kubevirt-py/virt-launcher:dev", Path("/a/l.tar")),
    ("registry.local/kubevirt-py/tiny-guest:v1", Path("/a/g.tar")),
)


def test_the_daemon_images_are_served_the_rest_imported() -> None:
    """virt-controller, virt-handler, virt-launcher come from the registry; the pause image
    and the test guest are still imported into each node."""
    served = projectregistry.served(IMAGES)
    assert [(i.repo, i.tag) for i in served] == [
        ("kubevirt-py/virt-controller", "dev"), ("kubevirt-py/virt-handler", "dev"),
        ("kubevirt-py/virt-launcher", "dev"),
    ]  # fmt: skip
    assert [ref for ref, _ in projectregistry.imported(IMAGES)] == [
        "registry.local/kubevirt-py/pause:3.10", "registry.local/kubevirt-py/tiny-guest:v1",
    ]  # fmt: skip


def test_nodes_pull_registry_local_from_the_project_registry(tmp_path: Path) -> None:
    """A node of a cluster with a registry imports only the pause image and the guest, and
    its containerd maps registry.local to the project registry over HTTPS with the CA."""
    config = ClusterConfig(
        state_dir=tmp_path / "state", nodes_dir=tmp_path / "n", bin_dir=tmp_path,
        node_kind=NodeKind.KUBELET, registry_dir=tmp_path / "r", images=IMAGES,
    )  # fmt: skip
    config.paths.root.mkdir(parents=True)
    (config.paths.root / "net.json").write_text(json.dumps({"block": 3}))
    node = Fleet(config, marker=("M", "x")).node("node01")
    assert node.inputs.images == projectregistry.imported(IMAGES)
    node.write_configs()
    path = node.layout.registry_config_dir / "registry.local" / "hosts.toml"
    hosts = tomllib.loads(path.read_text())
    mirror = f"https://{projectregistry.host(NetPlan(block=3))}"
    assert hosts["server"] == "https://registry.local"
    assert hosts["host"][mirror] == {"capabilities": ["pull", "resolve"],
                                     "ca": str(node.inputs.ca_file)}  # fmt: skip
    bare = Fleet(config.replace(registry_dir=None), marker=("M", "x")).node("node01")
    assert bare.inputs.images == IMAGES and bare.inputs.project_registry_host is None


def test_the_server_is_read_only_over_tls_the_writer_plain_on_loopback(tmp_path: Path) -> None:
    """No authentication either way; the gateway's server is read-only with the registry
    certificate; the writer is writable, plain HTTP; both over the same store."""
    pki = Pki(tmp_path / "pki")
    server = yaml.safe_load(
        projectregistry.registry_yaml(addr="198.18.0.1:5444", root=tmp_path / "s", pki=pki)
    )
    assert "auth" not in server
    assert server["storage"]["maintenance"] == {"readonly": {"enabled": True}}
    assert server["http"]["tls"]["certificate"] == str(pki.crt("registry"))
    writer = yaml.safe_load(
        projectregistry.registry_yaml(addr="127.0.0.1:5", root=tmp_path / "s", pki=None)
    )
    assert "auth" not in writer and "maintenance" not in writer["storage"]
    assert "tls" not in writer["http"]
    assert writer["storage"]["filesystem"] == server["storage"]["filesystem"]


def test_the_store_is_kept_per_checkout(tmp_path: Path) -> None:
    """Beside the registry build, one store per checkout (two trees' :dev tags never meet)."""
    out = tmp_path / "registry" / "key" / "out"

    def store(repo: Path) -> Path:
        config = ClusterConfig(state_dir=tmp_path, nodes_dir=tmp_path, bin_dir=tmp_path,
                               repo=repo)  # fmt: skip
        return projectregistry.store_dir(config, out)

    assert store(tmp_path / "a").parent == tmp_path / "registry" / "projects"
    assert store(tmp_path / "a") == store(tmp_path / "a") != store(tmp_path / "b")


def _archive(path: Path) -> dict[str, bytes]:
    """An OCI archive of one image: a config and one layer; its blobs by digest."""
    blobs: dict[str, bytes] = {}

    def add(data: bytes) -> dict[str, Any]:
        digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
        blobs[digest] = data
        return {"digest": digest, "size": len(data)}

    config = add(b'{"config":{}}')
    layer = add(b"layer bytes")
    manifest = json.dumps({"schemaVersion": 2, "config": config, "layers": [layer]}).encode()
    desc = {**add(manifest), "mediaType": "application/vnd.oci.image.manifest.v1+json"}
    with tarfile.open(path, "w") as tar:
        members = {"index.json": json.dumps({"manifests": [desc]}).encode()}
        members |= {f"blobs/sha256/{d.split(':')[1]}": b for d, b in blobs.items()}
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return blobs


class _Registry(http.server.BaseHTTPRequestHandler):
    """Just enough of the distribution API: blobs, one upload session, manifests."""

    blobs: ClassVar[dict[str, bytes]] = {}
    tags: ClassVar[dict[str, bytes]] = {}
    auth: ClassVar[list[str | None]] = []
    uploads: ClassVar[list[str]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, code: int, headers: dict[str, str] | None = None) -> None:
        self.auth.append(self.headers.get("Authorization"))
        self.send_response(code)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self) -> None:
        tail = self.path.split("/", 4)[-1]
        if tail.startswith("blobs/"):
            return self._answer(200 if tail.removeprefix("blobs/") in self.blobs else 404)
        tag = tail.removeprefix("manifests/")
        if tag not in self.tags:
            return self._answer(404)
        digest = f"sha256:{hashlib.sha256(self.tags[tag]).hexdigest()}"
        self._answer(200, {"Docker-Content-Digest": digest})

    def do_POST(self) -> None:
        self._answer(202, {"Location": "/v2/upload/1?state=x"})

    def do_PUT(self) -> None:
        data = self.rfile.read(int(self.headers["Content-Length"]))
        if "/manifests/" in self.path:
            self.tags[self.path.rsplit("/", 1)[1]] = data
        else:
            digest = self.path.split("digest=")[1].replace("%3A", ":")
            self.blobs[digest] = data
            self.uploads.append(digest)
        self._answer(201)


@pytest.fixture
def fake_registry() -> Iterator[str]:
    _Registry.blobs, _Registry.tags, _Registry.auth, _Registry.uploads = {}, {}, [], []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join()


def test_an_unlabelled_push_keeps_the_archives_digest(tmp_path: Path, fake_registry: str) -> None:
    """Over plain HTTP without credentials, the config, the layer and the manifest go as
    they are: the registry then serves the archive's digest; a second push sends no blob."""
    archive = tmp_path / "image.tar"
    blobs = _archive(archive)
    target = PushTarget(host=fake_registry, repo="kubevirt-py/virt-handler", tag="dev")
    assert remote_digest(target) is None
    pushed = push_archive(archive, target, label=None)
    assert pushed == archive_digest(archive) == remote_digest(target)
    assert _Registry.blobs == {d: b for d, b in blobs.items() if d != pushed}
    assert set(_Registry.auth) == {None}
    _Registry.uploads.clear()
    push_archive(archive, target, label=None)
    assert _Registry.uploads == []


async def test_a_node_untags_only_images_the_registry_serves_at_another_digest(
    tmp_path: Path,
) -> None:
    """After a rebuild (a cluster kept up), a node's older copy of a served image is
    removed, so the next pod pulls the new one; same digests and other images stay."""
    config = ClusterConfig(
        state_dir=tmp_path / "state", nodes_dir=tmp_path / "n", bin_dir=tmp_path,
        node_kind=NodeKind.KUBELET, registry_dir=tmp_path / "r", images=IMAGES,
    )  # fmt: skip
    config.paths.root.mkdir(parents=True)
    (config.paths.root / "net.json").write_text(json.dumps({"block": 3}))
    node = Fleet(config, marker=("M", "x")).node("node01")
    listing = (
        "REF TYPE DIGEST SIZE PLATFORMS LABELS\n"
        "registry.local/kubevirt-py/virt-handler:dev application/x sha256:old 80.0 MiB linux/amd64 -\n"
        "registry.local/kubevirt-py/virt-launcher:dev application/x sha256:same 140.0 MiB linux/amd64 -\n"
        "registry.local/kubevirt-py/tiny-guest:v1 application/x sha256:g 71.0 MiB linux/amd64 -\n"
    )
    calls: list[tuple[str, ...]] = []

    async def ctr(*args: str, timeout: float = 0) -> str:
        calls.append(args)
        return listing if args == ("images", "ls") else ""

    node._ctr = ctr  # type: ignore[method-assign]
    await node.forget_stale({
        "registry.local/kubevirt-py/virt-handler:dev": "sha256:new",
        "registry.local/kubevirt-py/virt-launcher:dev": "sha256:same",
    })  # fmt: skip
    assert calls == [
        ("images", "ls"),
        ("images", "rm", "registry.local/kubevirt-py/virt-handler:dev"),
    ]
