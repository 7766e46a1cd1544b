"""virt-importer-py: pull a containerDisk image's disk out of a registry into a file.

    virt-importer-py --image HOST/REPO:TAG --out /scratch/import/disk [--cert-dir /certs]

The DataVolume importer pod's init container for a ``registry`` source with
``pullMethod: pod`` (shared/registrypull.py is the contract with the controller):
credentials from ``IMPORTER_ACCESS_KEY_ID``/``IMPORTER_SECRET_KEY`` (the secretRef's
``accessKeyId``/``secretKey``), extra CAs from every file in ``--cert-dir`` (the
certConfigMap). Exit 0 with the disk written; else exit 1 with the reason in the
termination log (the DataVolume's Ready condition shows it).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import ssl
import sys
from collections.abc import Mapping
from pathlib import Path

from importer.layers import extract_disk
from importer.registry import Credentials, ImageRef, PullError, RegistryClient
from shared.registrypull import ACCESS_KEY_ENV, FAILURE_PREFIX, SECRET_KEY_ENV


def ssl_context(cert_dir: Path | None) -> ssl.SSLContext:
    """The system's CAs plus every PEM file in ``cert_dir`` (a mounted ConfigMap)."""
    ctx = ssl.create_default_context()
    if cert_dir is None or not cert_dir.is_dir():
        return ctx
    for f in sorted(cert_dir.iterdir()):
        if f.name.startswith(".") or not f.is_file():  # ConfigMap mounts' ..data links
            continue
        try:
            ctx.load_verify_locations(cafile=str(f))
        except (ssl.SSLError, OSError, ValueError) as e:
            raise PullError(f"certConfigMap key {f.name!r} is not a PEM CA bundle: {e}") from None
    return ctx


def credentials(env: Mapping[str, str]) -> Credentials | None:
    user, password = env.get(ACCESS_KEY_ENV), env.get(SECRET_KEY_ENV)
    if not user and not password:
        return None
    return Credentials(username=user or "", password=password or "")


def pull(image: str, *, out: Path, cert_dir: Path | None, env: Mapping[str, str]) -> str:
    """Write the image's disk to ``out``; returns where it was in the image."""
    ref = ImageRef.parse(image)
    client = RegistryClient(ref, ssl_ctx=ssl_context(cert_dir), credentials=credentials(env))
    manifest = client.manifest()
    return extract_disk(manifest["layers"], open_blob=client.blob, out=out)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="virt-importer-py")
    p.add_argument("--image", required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--cert-dir", type=Path, default=None)
    p.add_argument("--termination-log", type=Path, default=Path("/dev/termination-log"))
    ns = p.parse_args(argv)
    try:
        found = pull(ns.image, out=ns.out, cert_dir=ns.cert_dir, env=os.environ)
    except (PullError, OSError) as e:
        message = f"{FAILURE_PREFIX}: {ns.image}: {e}"
        print(message, file=sys.stderr)
        with contextlib.suppress(OSError):  # not in a pod: stderr says it
            ns.termination_log.write_text(message)
        sys.exit(1)
    print(f"pulled {ns.image}: {found} -> {ns.out}", file=sys.stderr)
