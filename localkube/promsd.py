"""Kubernetes service discovery for the local Prometheus, as a file_sd target file.

Debian's prometheus is built without ``kubernetes_sd_configs``; this process stands in for
it: every few seconds it lists the EndpointSlices, Services and Pods of the monitored
namespaces through the apiserver and writes the targets with the same
``__meta_kubernetes_*`` labels Prometheus' EndpointSlice role would give them, so the
Prometheus Operator's relabelling (localkube/promconfig.py) applies unchanged. Run as
``python -m localkube.promsd --state-dir DIR --namespace NS --out FILE``; stopped with
the local Prometheus.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import structlog

from localkube.components import Ports
from localkube.config import ClusterPaths
from localkube.health import admin_ssl
from localkube.pki import Pki

log = structlog.get_logger()
Obj = Mapping[str, Any]
PREFIX = "__meta_kubernetes_"


def _label_name(key: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", key)


def _object_labels(kind: str, obj: Obj) -> dict[str, str]:
    out = {f"{PREFIX}{kind}_name": obj["metadata"]["name"]}
    for key, value in (obj["metadata"].get("labels") or {}).items():
        out[f"{PREFIX}{kind}_label_{_label_name(key)}"] = value
        out[f"{PREFIX}{kind}_labelpresent_{_label_name(key)}"] = "true"
    return out


def _pod_labels(pod: Obj, port: int) -> dict[str, str]:
    out = {
        **_object_labels("pod", pod),
        f"{PREFIX}pod_phase": pod.get("status", {}).get("phase", ""),
        f"{PREFIX}pod_node_name": pod["spec"].get("nodeName", ""),
        f"{PREFIX}pod_ip": pod.get("status", {}).get("podIP", ""),
    }
    for container in pod["spec"].get("containers", []):
        for p in container.get("ports", []):
            if p.get("containerPort") == port:
                out[f"{PREFIX}pod_container_name"] = container["name"]
                out[f"{PREFIX}pod_container_port_name"] = p.get("name", "")
    return out


def target_groups(slices: list[Obj], services: list[Obj], pods: list[Obj]) -> list[dict[str, Any]]:
    """The file_sd target groups of these EndpointSlices: one target per address and port."""
    by_service = {(s["metadata"]["namespace"], s["metadata"]["name"]): s for s in services}
    by_pod = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pods}
    out = []
    for es in slices:
        ns = es["metadata"]["namespace"]
        service_name = (es["metadata"].get("labels") or {}).get("kubernetes.io/service-name", "")
        base = {f"{PREFIX}namespace": ns, f"{PREFIX}endpointslice_name": es["metadata"]["name"]}
        service = by_service.get((ns, service_name))
        if service is not None:
            base |= _object_labels("service", service)
        for address, labels in _targets(es, by_pod):
            out.append({"targets": [address], "labels": {**base, **labels}})
    return out


def _targets(
    es: Obj, by_pod: Mapping[tuple[str, str], Obj]
) -> Iterator[tuple[str, dict[str, str]]]:
    ns = es["metadata"]["namespace"]
    for endpoint in es.get("endpoints") or []:
        ref = endpoint.get("targetRef") or {}
        ready = (endpoint.get("conditions") or {}).get("ready")
        for address in endpoint.get("addresses", []):
            for port in es.get("ports") or []:
                labels = {
                    f"{PREFIX}endpointslice_port_name": port.get("name", ""),
                    f"{PREFIX}endpointslice_port": str(port.get("port", "")),
                    f"{PREFIX}endpointslice_port_protocol": port.get("protocol", "TCP"),
                    f"{PREFIX}endpointslice_address_type": es.get("addressType", ""),
                    f"{PREFIX}endpointslice_endpoint_conditions_ready": str(ready).lower(),
                    f"{PREFIX}endpointslice_address_target_kind": ref.get("kind", ""),
                    f"{PREFIX}endpointslice_address_target_name": ref.get("name", ""),
                }
                pod = by_pod.get((ns, ref.get("name", ""))) if ref.get("kind") == "Pod" else None
                if pod is not None:
                    labels |= _pod_labels(pod, int(port.get("port", 0)))
                yield f"{address}:{port.get('port')}", labels


async def _list(session: aiohttp.ClientSession, url: str) -> list[Obj]:
    async with asyncio.timeout(10), session.get(url) as resp:
        resp.raise_for_status()
        body = await resp.json()
    items: list[Obj] = body.get("items", [])
    return items


async def discover_once(
    session: aiohttp.ClientSession, server: str, namespaces: list[str]
) -> list[dict[str, Any]]:
    slices: list[Obj] = []
    services: list[Obj] = []
    pods: list[Obj] = []
    for ns in namespaces:
        slices += await _list(
            session, f"{server}/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices"
        )
        services += await _list(session, f"{server}/api/v1/namespaces/{ns}/services")
        pods += await _list(session, f"{server}/api/v1/namespaces/{ns}/pods")
    return target_groups(slices, services, pods)


def write_atomically(path: Path, groups: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(groups, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


async def run(*, state_dir: Path, namespaces: list[str], out: Path, interval: float) -> None:
    """Refresh `out` every `interval` seconds until cancelled; API errors keep the last file."""
    paths = ClusterPaths(root=state_dir)
    server = Ports.load_or_pick(paths.ports_file).server
    connector = aiohttp.TCPConnector(ssl=admin_ssl(Pki(paths.pki)))
    last = None
    async with aiohttp.ClientSession(connector=connector) as session:
        while True:
            try:
                groups = await discover_once(session, server, namespaces)
            except (aiohttp.ClientError, TimeoutError, OSError) as e:
                log.warning("discovery_failed", error=str(e))
            else:
                if groups != last:
                    write_atomically(out, groups)
                    log.info("targets_written", targets=len(groups), file=str(out))
                    last = groups
            await asyncio.sleep(interval)


def main() -> None:
    parser = argparse.ArgumentParser(prog="localkube.promsd", description=__doc__)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--namespace", action="append", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--interval", type=float, default=2.0)
    args = parser.parse_args()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    coro = run(
        state_dir=args.state_dir, namespaces=args.namespace, out=args.out, interval=args.interval
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(coro)


if __name__ == "__main__":
    main()
