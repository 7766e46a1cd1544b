"""Push one image from an OCI archive (scripts/build-images' output) to a registry over the
distribution API (HTTPS with the cluster CA and HTTP basic authentication, or plain HTTP
without credentials to a loopback writer): test-bed only.

A blob the registry has already (HEAD answers 200) is not sent again; each new blob goes
in one monolithic upload (POST an upload session, PUT its location with the digest), then
the manifest is PUT under the tag. Unlabelled, an image is pushed byte for byte (its
manifest digest is the archive's: ``archive_digest``), so ``remote_digest`` tells whether a
registry already serves it. Blocking (urllib): callers run it in a thread.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import ssl
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from localkube.errors import ComponentFailed

MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
TIMEOUT = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class PushTarget:
    """Where to push: ``https://<host>/v2/<repo>/`` as ``username``, trusting ``ca_file``;
    without a ``ca_file``, ``http://`` (a writer on loopback) and no credentials."""

    host: str
    repo: str
    tag: str
    username: str | None = None
    password: str | None = None
    ca_file: Path | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.ca_file is not None else "http"


def archive_digest(archive: Path) -> str:
    """The digest of the archive's (single) image manifest."""
    with tarfile.open(archive) as tar:
        return str(_descriptor(tar)["digest"])


def remote_digest(target: PushTarget) -> str | None:
    """The digest the registry serves for ``repo:tag`` (a HEAD, with the target's
    credentials if any), or None when it has no such tag."""
    status, headers = _call(
        _url(target, f"manifests/{target.tag}"), target, _ssl(target), method="HEAD",
        headers={"Accept": ", ".join(MANIFEST_TYPES)}, ok=(200, 404),
    )  # fmt: skip
    return str(headers.get("Docker-Content-Digest")) if status == 200 else None


def push_archive(archive: Path, target: PushTarget, *, label: tuple[str, str] | None) -> str:
    """Push the archive's (single) image manifest and its blobs; returns the pushed
    manifest's digest. With a ``label``, the image config carries it (so the pushed image
    has an image ID of its own: a kubelet that pulled it with a secret never treats the
    imported original as pulled with that secret); without, bytes as in the archive."""
    ctx = _ssl(target)
    with tarfile.open(archive) as tar:
        descriptor = _descriptor(tar)
        raw_manifest = _member(tar, _blob_path(str(descriptor["digest"]))).read()
        if label is not None:
            raw_manifest = _labelled(tar, raw_manifest, target, ctx, label=label)
        manifest = json.loads(raw_manifest)
        blobs = [manifest["config"]] if label is None else []
        for blob in [*blobs, *manifest["layers"]]:
            digest, size = str(blob["digest"]), int(blob["size"])
            _push_blob(_member(tar, _blob_path(digest)), target, ctx, digest=digest, size=size)
        url = _url(target, f"manifests/{target.tag}")
        _call(url, target, ctx, method="PUT", body=raw_manifest,
              headers={"Content-Type": str(descriptor["mediaType"])})  # fmt: skip
    return f"sha256:{hashlib.sha256(raw_manifest).hexdigest()}"


def _labelled(
    tar: tarfile.TarFile,
    raw_manifest: bytes,
    target: PushTarget,
    ctx: ssl.SSLContext | None,
    *,
    label: tuple[str, str],
) -> bytes:
    """The manifest re-pointed at a copy of its config carrying ``label`` (pushed here)."""
    manifest = json.loads(raw_manifest)
    config = json.loads(_member(tar, _blob_path(str(manifest["config"]["digest"]))).read())
    inner = config.get("config") or {}
    inner["Labels"] = {**(inner.get("Labels") or {}), label[0]: label[1]}
    config["config"] = inner
    raw_config = json.dumps(config, separators=(",", ":")).encode()
    config_digest = f"sha256:{hashlib.sha256(raw_config).hexdigest()}"
    manifest["config"] = {**manifest["config"], "digest": config_digest,
                          "size": len(raw_config)}  # fmt: skip
    _push_blob(io.BytesIO(raw_config), target, ctx, digest=config_digest, size=len(raw_config))
    return json.dumps(manifest, separators=(",", ":")).encode()


def _descriptor(tar: tarfile.TarFile) -> dict[str, Any]:
    index = json.loads(_member(tar, "index.json").read())
    (descriptor,) = [m for m in index["manifests"] if m.get("mediaType") in MANIFEST_TYPES]
    return dict(descriptor)


def _ssl(target: PushTarget) -> ssl.SSLContext | None:
    if target.ca_file is None:
        return None
    return ssl.create_default_context(cafile=str(target.ca_file))


def _member(tar: tarfile.TarFile, name: str) -> IO[bytes]:
    f = tar.extractfile(name)
    if f is None:
        raise ComponentFailed("registry push", f"{name} is not a file in {tar.name!r}")
    return f


def _blob_path(digest: str) -> str:
    algo, _, hexdigest = digest.partition(":")
    return f"blobs/{algo}/{hexdigest}"


def _push_blob(
    data: IO[bytes], target: PushTarget, ctx: ssl.SSLContext | None, *, digest: str, size: int
) -> None:
    status, _ = _call(_url(target, f"blobs/{digest}"), target, ctx, method="HEAD", ok=(200, 404))
    if status == 200:
        return
    _, headers = _call(_url(target, "blobs/uploads/"), target, ctx, method="POST", ok=(202,))
    base = f"{target.scheme}://{target.host}/"
    location = urllib.parse.urljoin(base, headers.get("Location", ""))
    sep = "&" if "?" in location else "?"
    put = f"{location}{sep}digest={urllib.parse.quote(digest)}"
    _call(put, target, ctx, method="PUT", body=data,
          headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)},
          ok=(201,))  # fmt: skip


def _url(target: PushTarget, tail: str) -> str:
    return f"{target.scheme}://{target.host}/v2/{target.repo}/{tail}"


def _call(
    url: str,
    target: PushTarget,
    ctx: ssl.SSLContext | None,
    *,
    method: str,
    body: bytes | IO[bytes] | None = None,
    headers: dict[str, str] | None = None,
    ok: tuple[int, ...] = (200, 201, 202),
) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=body, method=method)
    if target.username is not None:
        creds = base64.b64encode(f"{target.username}:{target.password}".encode()).decode()
        req.add_header("Authorization", f"Basic {creds}")
    for key, value in (headers or {}).items():
        req.add_header(key, value)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=TIMEOUT) as resp:
            return int(resp.status), resp.headers
    except urllib.error.HTTPError as e:
        if e.code in ok:
            return e.code, e.headers
        detail = e.read()[:500].decode(errors="replace")
        raise ComponentFailed("registry push", f"{method} {url}: HTTP {e.code}: {detail}") from e
