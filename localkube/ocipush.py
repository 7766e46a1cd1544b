"""Push one image from an OCI archive (scripts/build-images' output) to a registry over the
distribution API, with HTTP basic authentication and the cluster CA: test-bed only.

A blob the registry has already (HEAD answers 200) is not sent again; each new blob goes
in one monolithic upload (POST an upload session, PUT its location with the digest), then
the manifest is PUT under the tag. Blocking (urllib): callers run it in a thread.
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
    """Where to push: ``https://<host>/v2/<repo>/`` as ``username``, trusting ``ca_file``."""

    host: str
    repo: str
    tag: str
    username: str
    password: str
    ca_file: Path


def push_archive(archive: Path, target: PushTarget, *, label: tuple[str, str]) -> str:
    """Push the archive's (single) image manifest and its blobs, the image config carrying
    ``label`` (so the pushed image has an image ID of its own: a kubelet that pulled it
    with a secret never treats the imported original as pulled with that secret);
    returns the pushed manifest's digest."""
    ctx = ssl.create_default_context(cafile=str(target.ca_file))
    with tarfile.open(archive) as tar:
        index = json.loads(_member(tar, "index.json").read())
        (descriptor,) = [m for m in index["manifests"] if m.get("mediaType") in MANIFEST_TYPES]
        manifest = json.loads(_member(tar, _blob_path(str(descriptor["digest"]))).read())
        config = json.loads(_member(tar, _blob_path(str(manifest["config"]["digest"]))).read())
        inner = config.get("config") or {}
        inner["Labels"] = {**(inner.get("Labels") or {}), label[0]: label[1]}
        config["config"] = inner
        raw_config = json.dumps(config, separators=(",", ":")).encode()
        config_digest = f"sha256:{hashlib.sha256(raw_config).hexdigest()}"
        manifest["config"] = {**manifest["config"], "digest": config_digest,
                              "size": len(raw_config)}  # fmt: skip
        _push_blob(io.BytesIO(raw_config), target, ctx, digest=config_digest, size=len(raw_config))
        for blob in manifest["layers"]:
            digest, size = str(blob["digest"]), int(blob["size"])
            _push_blob(_member(tar, _blob_path(digest)), target, ctx, digest=digest, size=size)
        raw_manifest = json.dumps(manifest, separators=(",", ":")).encode()
        url = _url(target, f"manifests/{target.tag}")
        _call(url, target, ctx, method="PUT", body=raw_manifest,
              headers={"Content-Type": str(descriptor["mediaType"])})  # fmt: skip
    return f"sha256:{hashlib.sha256(raw_manifest).hexdigest()}"


def _member(tar: tarfile.TarFile, name: str) -> IO[bytes]:
    f = tar.extractfile(name)
    if f is None:
        raise ComponentFailed("registry push", f"{name} is not a file in {tar.name!r}")
    return f


def _blob_path(digest: str) -> str:
    algo, _, hexdigest = digest.partition(":")
    return f"blobs/{algo}/{hexdigest}"


def _push_blob(
    data: IO[bytes], target: PushTarget, ctx: ssl.SSLContext, *, digest: str, size: int
) -> None:
    status, _ = _call(_url(target, f"blobs/{digest}"), target, ctx, method="HEAD", ok=(200, 404))
    if status == 200:
        return
    _, headers = _call(_url(target, "blobs/uploads/"), target, ctx, method="POST", ok=(202,))
    location = urllib.parse.urljoin(f"https://{target.host}/", headers.get("Location", ""))
    sep = "&" if "?" in location else "?"
    put = f"{location}{sep}digest={urllib.parse.quote(digest)}"
    _call(put, target, ctx, method="PUT", body=data,
          headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)},
          ok=(201,))  # fmt: skip


def _url(target: PushTarget, tail: str) -> str:
    return f"https://{target.host}/v2/{target.repo}/{tail}"


def _call(
    url: str,
    target: PushTarget,
    ctx: ssl.SSLContext,
    *,
    method: str,
    body: bytes | IO[bytes] | None = None,
    headers: dict[str, str] | None = None,
    ok: tuple[int, ...] = (200, 201, 202),
) -> tuple[int, Any]:
    creds = base64.b64encode(f"{target.username}:{target.password}".encode()).decode()
    req = urllib.request.Request(url, data=body, method=method)
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
