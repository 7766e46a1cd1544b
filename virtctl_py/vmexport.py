"""`vmexport create|delete|download`: KubeVirt's virtctl vmexport, against export.kubevirt.io.

    virtctl-py vmexport create NAME (--pvc=CLAIM | --vm=VM) [--ttl=1h]
    virtctl-py vmexport delete NAME
    virtctl-py vmexport download NAME --output=FILE [--vm=VM | --pvc=CLAIM] [--volume=V]
                                      [--format=gzip|raw] [--keep-vme | --delete-vme]

`download` waits for the export to be Ready, forwards a local port to its exporter pod
through the API server (KubeVirt's --port-forward; the Service's pod, its port 443's
target), verifies the server against status.links.internal.cert under the Service's name,
sends the token from status.tokenSecretRef, and writes FILE: the raw disk (its
Content-Length checked) or the gzip stream (decompressed on the fly to check it is whole
and its CRC right). With --vm/--pvc it creates the export first and deletes it after.
"""

from __future__ import annotations

import argparse
import base64
import os
import ssl
import sys
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from shared.kube import PODS, SERVICES, AlreadyExists, KubeClient, NotFound
from shared.kube.resources import SECRETS, VMEXPORTS
from shared.model.export import (
    EXPORT_API_VERSION,
    PVC_KIND,
    SERVICE_PORT,
    SNAPSHOT_KIND,
    SOURCE_GROUPS,
    TOKEN_HEADER,
    TOKEN_KEY,
    VM_KIND,
    ExportFormat,
    ExportPhase,
    VirtualMachineExport,
)
from virtctl_py.errors import CliError, Exit
from virtctl_py.podforward import forward_pod
from virtctl_py.session import Target
from virtctl_py.wait import wait_until

CHUNK = 1 << 20
READ_TIMEOUT = 60.0


async def vmexport(kube: KubeClient, target: Target, args: argparse.Namespace) -> str:
    """The `vmexport` verb."""
    if args.action == "create":
        return await create(kube, target.namespace, args)
    if args.action == "delete":
        return await delete(kube, target.namespace, args.name)
    return await download(kube, target, args)


def source_of(args: argparse.Namespace) -> dict[str, str]:
    """spec.source from --pvc / --vm / --snapshot (exactly one)."""
    given = [
        (k, v)
        for k, v in ((PVC_KIND, args.pvc), (VM_KIND, args.vm), (SNAPSHOT_KIND, args.snapshot))
        if v
    ]
    if len(given) != 1:
        raise CliError("give exactly one of --pvc, --vm or --snapshot", code=Exit.USAGE)
    kind, name = given[0]
    return {"apiGroup": SOURCE_GROUPS[kind][0], "kind": kind, "name": name}


async def create(kube: KubeClient, namespace: str, args: argparse.Namespace) -> str:
    body: dict[str, Any] = {
        "apiVersion": EXPORT_API_VERSION,
        "kind": VirtualMachineExport.KIND,
        "metadata": {"name": args.name, "namespace": namespace},
        "spec": {"source": source_of(args)},
    }
    if args.ttl:
        body["spec"]["ttlDuration"] = args.ttl
    try:
        await kube.create(VMEXPORTS, body, namespace=namespace)
    except AlreadyExists as e:
        raise CliError(
            f"VirtualMachineExport {namespace}/{args.name} already exists", code=Exit.CONFLICT
        ) from e
    return f"VirtualMachineExport '{namespace}/{args.name}' created succesfully"


async def delete(kube: KubeClient, namespace: str, name: str) -> str:
    try:
        await kube.delete(VMEXPORTS, name, namespace=namespace)
    except NotFound:
        return f"VirtualMachineExport '{namespace}/{name}' does not exist"
    return f"VirtualMachineExport '{namespace}/{name}' deleted succesfully"


async def download(kube: KubeClient, target: Target, args: argparse.Namespace) -> str:
    if not args.output:
        raise CliError("download needs --output=FILE", code=Exit.USAGE)
    created = False
    if args.pvc or args.vm or args.snapshot:
        await create(kube, target.namespace, args)
        created = True
    try:
        vme = await _wait_ready(kube, target.namespace, args.name, timeout=args.readiness_timeout)
        written = await _fetch(kube, target, vme, args)
    finally:
        if (created and not args.keep_vme) or args.delete_vme:
            await delete(kube, target.namespace, args.name)
    return f"Download finished succesfully: {written} bytes written to {args.output}"


async def _wait_ready(
    kube: KubeClient, namespace: str, name: str, *, timeout: float
) -> VirtualMachineExport:
    found: list[VirtualMachineExport] = []

    async def probe() -> tuple[bool, str]:
        try:
            vme = VirtualMachineExport.from_dict(
                await kube.get(VMEXPORTS, name, namespace=namespace)
            )
        except NotFound:
            return False, "not created yet"
        ready = vme.status.condition("Ready")
        found[:] = [vme]
        if vme.phase is ExportPhase.TERMINATED:
            raise CliError(f"VirtualMachineExport {namespace}/{name} is Terminated")
        done = vme.phase is ExportPhase.READY and vme.status.links is not None
        return done, f"{vme.phase or 'Pending'} {(ready.message if ready else None) or ''}".strip()

    await wait_until(probe, what=f"VirtualMachineExport {name}", timeout=timeout)
    return found[0]


def _link(
    vme: VirtualMachineExport, volume: str | None, fmt: ExportFormat
) -> tuple[str, str, ExportFormat]:
    """(URL, CA certificate, format) of the volume's download in `fmt`; a claim of files (a
    memory dump's) has only its tar.gz archive, which is what comes then."""
    link = vme.status.links.internal if vme.status.links else None
    if link is None or not link.volumes:
        raise CliError(f"VirtualMachineExport {vme.name} has no internal links")
    chosen = link.volume(volume)
    if chosen is None:
        names = ", ".join(v.name or "" for v in link.volumes)
        hint = "select one with --volume" if volume is None else f"no volume {volume!r}"
        raise CliError(f"{hint} (the export has: {names})", code=Exit.USAGE)
    if chosen.url(fmt) is None and chosen.url(ExportFormat.TAR_GZ) is not None:
        fmt = ExportFormat.TAR_GZ
    url = chosen.url(fmt)
    if url is None:
        raise CliError(f"volume {chosen.name} has no {fmt} download")
    return url, link.cert or "", fmt


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One download: where (through the local port), with what token, trusting what."""

    url: str
    token: str
    tls: ssl.SSLContext | bool
    server_name: str


async def _fetch(
    kube: KubeClient, target: Target, vme: VirtualMachineExport, args: argparse.Namespace
) -> int:
    fmt = ExportFormat.RAW if args.format == "raw" else ExportFormat.GZIP
    url, cert, fmt = _link(vme, args.volume, fmt)
    token = await _token(kube, vme)
    pod, port = await _exporter(kube, vme)
    tls: ssl.SSLContext | bool = False if args.insecure else ssl.create_default_context(cadata=cert)
    async with forward_pod(target, pod=pod, port=port, local_port=args.local_port) as local:
        parts = urlsplit(url)
        request = Request(
            url=urlunsplit(parts._replace(netloc=f"127.0.0.1:{local}")),
            token=token,
            tls=tls,
            server_name=parts.hostname or "",
        )
        gzip = fmt in (ExportFormat.GZIP, ExportFormat.TAR_GZ)
        return await _save(request, output=Path(args.output), gzip=gzip)


async def _token(kube: KubeClient, vme: VirtualMachineExport) -> str:
    name = vme.status.token_secret_ref or vme.spec.token_secret_ref
    if not name:
        raise CliError(f"VirtualMachineExport {vme.name} names no token Secret")
    secret = await kube.get(SECRETS, name, namespace=vme.namespace)
    value = (secret.get("data") or {}).get(TOKEN_KEY)
    if not isinstance(value, str):
        raise CliError(f"Secret {name} has no {TOKEN_KEY!r} key")
    return base64.b64decode(value).decode()


async def _exporter(kube: KubeClient, vme: VirtualMachineExport) -> tuple[str, int]:
    """The exporter pod behind status.serviceName and the container port of its port 443."""
    service = await kube.get(SERVICES, vme.status.service_name or "", namespace=vme.namespace)
    spec = service.get("spec") or {}
    selector = ",".join(f"{k}={v}" for k, v in (spec.get("selector") or {}).items())
    pods = (await kube.list(PODS, namespace=vme.namespace, label_selector=selector)).items
    if not selector or not pods:
        raise CliError(f"no exporter pod behind Service {vme.status.service_name}")
    pod = pods[0]
    ports = [p for p in spec.get("ports") or () if p.get("port") == SERVICE_PORT]
    wanted = ports[0].get("targetPort", SERVICE_PORT) if ports else SERVICE_PORT
    return str(pod["metadata"]["name"]), _container_port(pod, wanted)


def _container_port(pod: Mapping[str, Any], wanted: Any) -> int:
    if isinstance(wanted, int):
        return wanted
    for container in (pod.get("spec") or {}).get("containers") or ():
        for port in container.get("ports") or ():
            if port.get("name") == wanted:
                return int(port["containerPort"])
    raise CliError(f"the exporter pod has no port named {wanted!r}")


async def _save(request: Request, *, output: Path, gzip: bool) -> int:
    """GET the request into `output` (through a temporary file), verified; the bytes written."""
    partial = output.with_name(output.name + ".partial")
    check = zlib.decompressobj(31) if gzip else None
    try:
        written, expected = await _stream(request, partial=partial, check=check)
        _verify(written, expected=expected, check=check, output=output)
    except zlib.error as e:
        partial.unlink(missing_ok=True)
        raise CliError(f"{output}: the gzip stream is corrupt: {e}") from e
    except aiohttp.ClientError as e:
        partial.unlink(missing_ok=True)
        raise CliError(f"download from the exporter failed: {e}") from e
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, output)
    return written


async def _stream(request: Request, *, partial: Path, check: Any) -> tuple[int, int | None]:
    timeout = aiohttp.ClientTimeout(sock_connect=30, sock_read=READ_TIMEOUT)
    headers = {TOKEN_HEADER: request.token}
    written = 0
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(
            request.url, headers=headers, ssl=request.tls, server_hostname=request.server_name
        ) as resp,
    ):
        if resp.status != 200:
            text = (await resp.text())[:200].strip()
            raise CliError(f"the exporter answered {resp.status}: {text}")
        with partial.open("wb") as f:
            async for chunk in resp.content.iter_chunked(CHUNK):
                f.write(chunk)
                written += len(chunk)
                if check is not None:
                    check.decompress(chunk)
        return written, resp.content_length


def _verify(written: int, *, expected: int | None, check: Any, output: Path) -> None:
    if expected is not None and written != expected:
        raise CliError(f"{output}: {written} bytes received, the exporter announced {expected}")
    if check is not None and not check.eof:
        raise CliError(f"{output}: the gzip stream ended early ({written} bytes)")
    print(f"verified {written} bytes", file=sys.stderr)
