"""A small OCI distribution client: enough to pull one containerDisk image, as CDI's
importer does for ``pullMethod: pod`` (the node's runtime is not involved).

- **References**: ``host[:port]/repo[:tag|@digest]``; a first part without a dot, a colon
  or ``localhost`` is Docker Hub's (``docker.io``, ``library/`` for one-part names).
- **Authentication**: anonymous first; on 401, HTTP basic with the credentials (a
  ``Basic`` challenge) or a bearer token from the challenge's realm (``Bearer``, the token
  asked for with the credentials, if any).
- **Manifests**: an OCI index or Docker manifest list picks linux/amd64; then the image
  manifest's layers, whose blobs are read as streams (their digests verified by the
  caller's reader, importer/layers.py).

Blocking (urllib) on purpose: the importer is a one-shot command; every request has
``TIMEOUT``.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import IO, Any

TIMEOUT = 60.0
DOCKER_HUB = "registry-1.docker.io"
INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


class PullError(Exception):
    """The image cannot be pulled; the message says why (shown on the DataVolume)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageRef:
    """A parsed image reference: registry host, repository, tag or digest."""

    host: str
    repo: str
    reference: str  # a tag or a sha256:… digest

    @classmethod
    def parse(cls, image: str) -> ImageRef:
        """``host[:port]/repo[:tag|@digest]`` (Docker's rules for the host and defaults)."""
        name, digest = image.split("@", 1) if "@" in image else (image, "")
        first, _, rest = name.partition("/")
        if not rest or not ("." in first or ":" in first or first == "localhost"):
            first, rest = DOCKER_HUB, name if "/" in name else f"library/{name}"
        tag = ""
        if ":" in rest.rsplit("/", 1)[-1]:
            rest, tag = rest.rsplit(":", 1)
        if not rest or not re.fullmatch(r"[a-z0-9]+([._/-][a-z0-9]+)*", rest):
            raise PullError(f"{image!r} is not a valid image reference")
        return cls(host=first, repo=rest, reference=digest or tag or "latest")


@dataclass(frozen=True, slots=True, kw_only=True)
class Credentials:
    username: str
    password: str


class RegistryClient:
    """Requests to one registry for one repository, authenticated once needed."""

    def __init__(
        self, ref: ImageRef, *, ssl_ctx: ssl.SSLContext, credentials: Credentials | None
    ) -> None:
        self.ref = ref
        self._ctx = ssl_ctx
        self._creds = credentials
        self._auth: str | None = None  # the Authorization header that worked

    def _url(self, tail: str) -> str:
        return f"https://{self.ref.host}/v2/{self.ref.repo}/{tail}"

    def open(self, tail: str, *, accept: tuple[str, ...] = ()) -> IO[bytes]:
        """GET ``/v2/<repo>/<tail>``; PullError naming the HTTP answer otherwise."""
        url = self._url(tail)
        try:
            return self._get(url, accept)
        except urllib.error.HTTPError as e:
            if e.code != 401 or self._auth is not None:
                raise _http_error(url, e) from None
            self._auth = self._authorize(e.headers.get("WWW-Authenticate", ""))
        try:
            return self._get(url, accept)
        except urllib.error.HTTPError as e:
            raise _http_error(url, e) from None

    def _get(self, url: str, accept: tuple[str, ...]) -> IO[bytes]:
        req = urllib.request.Request(url)
        if accept:
            req.add_header("Accept", ", ".join(accept))
        if self._auth:
            req.add_header("Authorization", self._auth)
        try:
            resp: IO[bytes] = urllib.request.urlopen(req, context=self._ctx, timeout=TIMEOUT)
        except urllib.error.HTTPError:
            raise  # an answer (401, 404…): the caller decides (HTTPError is a URLError)
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise PullError(f"cannot reach {self.ref.host}: {reason}") from None
        return resp

    def _authorize(self, challenge: str) -> str:
        scheme = challenge.split(" ", 1)[0].lower()
        if scheme == "basic":
            if self._creds is None:
                raise PullError(f"{self.ref.host} requires credentials (no secretRef given)")
            return f"Basic {_basic(self._creds)}"
        if scheme == "bearer":
            return f"Bearer {self._token(dict(_CHALLENGE.findall(challenge)))}"
        raise PullError(f"{self.ref.host}: unsupported authentication {challenge!r}")

    def _token(self, params: dict[str, str]) -> str:
        realm = params.pop("realm", "")
        if not realm.startswith("https://"):
            raise PullError(f"{self.ref.host}: token realm {realm!r} is not https")
        params.setdefault("scope", f"repository:{self.ref.repo}:pull")
        req = urllib.request.Request(f"{realm}?{urllib.parse.urlencode(params)}")
        if self._creds is not None:
            req.add_header("Authorization", f"Basic {_basic(self._creds)}")
        try:
            with urllib.request.urlopen(req, context=self._ctx, timeout=TIMEOUT) as resp:
                body = json.loads(resp.read())
        except urllib.error.HTTPError as e:
            raise _http_error(realm, e) from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise PullError(f"token from {realm}: {e}") from None
        token = body.get("token") or body.get("access_token")
        if not token:
            raise PullError(f"token from {realm}: no token in the answer")
        return str(token)

    def manifest(self) -> dict[str, Any]:
        """The image manifest (through an index: the linux/amd64 entry)."""
        doc = self._manifest(self.ref.reference)
        if doc.get("mediaType") in INDEX_TYPES or "manifests" in doc:
            doc = self._manifest(pick_platform(doc))
        if not isinstance(doc.get("layers"), list):
            raise PullError(f"{self.ref.repo}: the manifest lists no layers")
        return doc

    def _manifest(self, reference: str) -> dict[str, Any]:
        with self.open(f"manifests/{reference}", accept=(*MANIFEST_TYPES, *INDEX_TYPES)) as f:
            try:
                doc = json.loads(f.read(4 * 1024 * 1024))
            except ValueError as e:
                raise PullError(f"{self.ref.repo}:{reference}: not a manifest: {e}") from None
        if not isinstance(doc, dict):
            raise PullError(f"{self.ref.repo}:{reference}: not a manifest")
        return doc

    def blob(self, digest: str) -> IO[bytes]:
        return self.open(f"blobs/{digest}")


def pick_platform(index: dict[str, Any], *, os: str = "linux", arch: str = "amd64") -> str:
    """The digest of the index entry for ``os``/``arch`` (else the only entry)."""
    entries = [m for m in index.get("manifests") or () if isinstance(m, dict)]
    for m in entries:
        platform = m.get("platform") or {}
        if platform.get("os") == os and platform.get("architecture") == arch:
            return str(m["digest"])
    if len(entries) == 1:
        return str(entries[0]["digest"])
    raise PullError(f"the image index has no {os}/{arch} manifest")


def _basic(creds: Credentials) -> str:
    return base64.b64encode(f"{creds.username}:{creds.password}".encode()).decode()


def _http_error(url: str, e: urllib.error.HTTPError) -> PullError:
    hint = " (check spec.source.registry.secretRef)" if e.code in (401, 403) else ""
    return PullError(f"GET {url}: HTTP {e.code} {e.reason}{hint}")
