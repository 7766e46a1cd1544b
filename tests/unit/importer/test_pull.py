"""virt-importer-py's registry pull against a fake registry (urlopen replaced): references,
basic and bearer authentication, an index's linux/amd64 entry, the top layer's /disk/ file,
digests checked, and each failure a PullError (exit 1, the termination log saying why)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import ssl
import tarfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from email.message import Message
from pathlib import Path
from typing import Any

import pytest

from importer import main as importer_main
from importer.registry import ImageRef, PullError
from shared.registrypull import ACCESS_KEY_ENV, FAILURE_PREFIX, SECRET_KEY_ENV

HOST = "198.18.0.1:5443"
REPO = "kubevirt-py/tiny-guest"
USER, PASSWORD = "kubevirt-py", "s3cret"


def _layer(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _digest(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


class FakeRegistry:
    """Serves one repository: blobs and manifests by digest or tag, behind `auth`."""

    def __init__(self, layers: list[bytes], *, auth: str = "basic") -> None:
        self.auth = auth
        self.blobs = {_digest(b): b for b in layers}
        manifest = json.dumps({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"digest": "sha256:00", "size": 2},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest": _digest(b), "size": len(b)} for b in layers],
        }).encode()  # fmt: skip
        self.manifests = {"v1": manifest, _digest(manifest): manifest}
        self.seen: list[str] = []

    def index(self) -> None:
        """Make tag v1 an index whose linux/amd64 entry is the image."""
        image = _digest(self.manifests["v1"])
        self.manifests["v1"] = json.dumps({
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {"digest": "sha256:arm", "platform": {"os": "linux", "architecture": "arm64"}},
                {"digest": image, "platform": {"os": "linux", "architecture": "amd64"}},
            ],
        }).encode()  # fmt: skip

    def _authorized(self, header: str | None) -> bool:
        basic = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        return header == (basic if self.auth == "basic" else "Bearer tok")

    def urlopen(self, req: urllib.request.Request, **_: Any) -> io.BytesIO:
        url = req.full_url
        self.seen.append(url)
        if url.startswith("https://auth.example/token"):
            basic = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
            if req.get_header("Authorization") != basic:
                raise _error(url, 401)
            return io.BytesIO(b'{"token": "tok"}')
        if not self._authorized(req.get_header("Authorization")):
            challenge = (
                'Basic realm="r"' if self.auth == "basic"
                else 'Bearer realm="https://auth.example/token",service="reg"'
            )  # fmt: skip
            raise _error(url, 401, challenge)
        prefix = f"https://{HOST}/v2/{REPO}/"
        kind, _sep, ref = url.removeprefix(prefix).partition("/")
        table = self.manifests if kind == "manifests" else self.blobs
        if ref not in table:
            raise _error(url, 404)
        return io.BytesIO(table[ref])


def _error(url: str, code: int, challenge: str = "") -> urllib.error.HTTPError:
    headers = Message()
    if challenge:
        headers["WWW-Authenticate"] = challenge
    return urllib.error.HTTPError(url, code, "Unauthorized" if code == 401 else "Not Found",
                                  headers, io.BytesIO(b""))  # fmt: skip


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeRegistry]:
    reg = FakeRegistry([
        _layer({"disk/old.img": b"lower"}),
        _layer({"etc/x": b"x", "./disk/guest.img": b"DISK" * 10}),
    ])  # fmt: skip
    monkeypatch.setattr(urllib.request, "urlopen", reg.urlopen)
    yield reg


def _env(password: str = PASSWORD) -> dict[str, str]:
    return {ACCESS_KEY_ENV: USER, SECRET_KEY_ENV: password}


@pytest.mark.parametrize(
    ("image", "host", "repo", "reference"),
    [
        (f"{HOST}/{REPO}:v1", HOST, REPO, "v1"),
        ("quay.io/a/b", "quay.io", "a/b", "latest"),
        ("busybox", "registry-1.docker.io", "library/busybox", "latest"),
        ("user/app:2", "registry-1.docker.io", "user/app", "2"),
        ("localhost/app@sha256:ab", "localhost", "app", "sha256:ab"),
    ],
)
def test_references_parse_as_docker_does(image: str, host: str, repo: str, reference: str) -> None:
    """Host (Docker Hub by default), repository and tag or digest."""
    assert ImageRef.parse(image) == ImageRef(host=host, repo=repo, reference=reference)


def test_a_bad_reference_is_refused() -> None:
    """An upper-case repository is no reference."""
    with pytest.raises(PullError, match="not a valid image reference"):
        ImageRef.parse(f"{HOST}/Bad/Repo:v1")


def test_basic_auth_pull_writes_the_top_layers_disk(registry: FakeRegistry, tmp_path: Path) -> None:
    """Anonymous first, then basic with the Secret's keys; the top layer's /disk/ file is
    written (the lower layer's is hidden)."""
    out = tmp_path / "import" / "disk"
    found = importer_main.pull(f"{HOST}/{REPO}:v1", out=out, cert_dir=None, env=_env())
    assert found == "/disk/guest.img" and out.read_bytes() == b"DISK" * 10


def test_bearer_token_and_an_index(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A Bearer challenge: the token comes from the realm with the credentials; an index
    tag resolves to its linux/amd64 manifest."""
    reg = FakeRegistry([_layer({"disk/d.qcow2": b"Q"})], auth="bearer")
    reg.index()
    monkeypatch.setattr(urllib.request, "urlopen", reg.urlopen)
    out = tmp_path / "disk"
    importer_main.pull(f"{HOST}/{REPO}:v1", out=out, cert_dir=None, env=_env())
    assert out.read_bytes() == b"Q"
    assert any("scope=repository" in u for u in reg.seen)


@pytest.mark.parametrize(
    ("env", "why"),
    [
        pytest.param(_env("wrong"), "HTTP 401 Unauthorized (check spec.source.registry.secretRef)",
                     id="wrong-password"),
        pytest.param({}, "requires credentials (no secretRef given)", id="no-credentials"),
    ],
)  # fmt: skip
def test_refused_credentials_fail_the_pull(
    registry: FakeRegistry, tmp_path: Path, env: dict[str, str], why: str
) -> None:
    """A wrong password or none: PullError saying so."""
    with pytest.raises(PullError, match=why.replace("(", r"\(").replace(")", r"\)")):
        importer_main.pull(f"{HOST}/{REPO}:v1", out=tmp_path / "d", cert_dir=None, env=env)


def test_missing_tag_and_no_disk_and_bad_digest_fail(
    registry: FakeRegistry, tmp_path: Path
) -> None:
    """A tag the registry lacks (404), an image without /disk/ and a layer whose content
    does not match its digest each fail the pull, saying which."""
    with pytest.raises(PullError, match="HTTP 404"):
        importer_main.pull(f"{HOST}/{REPO}:v2", out=tmp_path / "d", cert_dir=None, env=_env())
    registry.blobs = {d: _layer({"etc/x": b"x"}) for d in registry.blobs}
    with pytest.raises(PullError, match="does not match its digest"):
        importer_main.pull(f"{HOST}/{REPO}:v1", out=tmp_path / "d", cert_dir=None, env=_env())
    plain = FakeRegistry([_layer({"etc/x": b"x"})])
    registry.blobs, registry.manifests = plain.blobs, plain.manifests
    with pytest.raises(PullError, match="no file under /disk/"):
        importer_main.pull(f"{HOST}/{REPO}:v1", out=tmp_path / "d", cert_dir=None, env=_env())


def test_a_cert_file_that_is_no_ca_is_named(tmp_path: Path) -> None:
    """A certConfigMap key holding no PEM CA: PullError naming the key; ConfigMap mounts'
    dot-entries are skipped."""
    (tmp_path / "..data").mkdir()
    (tmp_path / "ca.crt").write_text("not a certificate")
    with pytest.raises(PullError, match=r"certConfigMap key 'ca\.crt'"):
        importer_main.ssl_context(tmp_path)
    assert isinstance(importer_main.ssl_context(tmp_path / "absent"), ssl.SSLContext)


def test_main_exits_1_with_the_reason_in_the_termination_log(
    registry: FakeRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed pull exits 1 and writes 'the source image cannot be pulled: <image>: why'
    to the termination log (the DataVolume's reason)."""
    monkeypatch.setenv(ACCESS_KEY_ENV, USER)
    monkeypatch.setenv(SECRET_KEY_ENV, "wrong")
    log = tmp_path / "termination-log"
    image = f"{HOST}/{REPO}:v1"
    argv = ["--image", image, "--out", str(tmp_path / "d"), "--termination-log", str(log)]
    with pytest.raises(SystemExit) as exit_info:
        importer_main.main(argv)
    assert exit_info.value.code == 1
    assert log.read_text().startswith(f"{FAILURE_PREFIX}: {image}: GET https://{HOST}/")
    assert "HTTP 401" in log.read_text()
