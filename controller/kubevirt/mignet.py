"""virt-operator's part of the migration network: the KubeVirt CR's
`spec.configuration.migrations.network` put on the handler DaemonSet's pods.

The handler pods get the NetworkAttachmentDefinition as the multus network `migration0`
(their pod template's `k8s.v1.cni.cncf.io/networks` annotation, as KubeVirt's operator
renders it; the DaemonSet rolls its pods), and each handler's migration proxy then listens
and dials on that interface (handler/mignet.py). A network whose NAD does not exist is
not put on the DaemonSet (its pods could not start): the annotation in force stays and the
CR's Degraded condition says why (logic.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from shared.kube import KubeClient, NotFound
from shared.kube.resources import DAEMONSETS, NADS
from shared.mignet import FIELD, HANDLER_DAEMONSET, handler_networks
from shared.multus import NETWORKS_ANNOTATION

log = structlog.get_logger("controller.kubevirt")


def missing_network(network: str, *, namespace: str) -> str:
    """The CR's condition message when the network's NAD is not there."""
    return (
        f"{FIELD}: NetworkAttachmentDefinition {namespace}/{network} not found; "
        "migrations keep the network in force"
    )


def template_patch(
    daemonset: Mapping[str, Any], network: str | None, *, namespace: str
) -> dict[str, Any] | None:
    """The merge patch that gives the DaemonSet's pods `network` (None: no migration
    network, the annotation removed); None when the template already says so."""
    template = daemonset.get("spec", {}).get("template", {})
    annotations = template.get("metadata", {}).get("annotations") or {}
    current = annotations.get(NETWORKS_ANNOTATION)
    wanted = handler_networks(network, namespace=namespace) if network else None
    if current == wanted:
        return None
    return {"spec": {"template": {"metadata": {"annotations": {NETWORKS_ANNOTATION: wanted}}}}}


async def sync_handler_networks(
    client: KubeClient, network: str | None, *, namespace: str
) -> str | None:
    """Bring the handler DaemonSet to `network`; the problem to report, if any."""
    if network is not None:
        try:
            await client.get(NADS, network, namespace=namespace)
        except NotFound:
            return missing_network(network, namespace=namespace)
    try:
        daemonset = await client.get(DAEMONSETS, HANDLER_DAEMONSET, namespace=namespace)
    except NotFound:  # handlers not run as this DaemonSet (process-mode nodes)
        return None
    patch = template_patch(daemonset, network, namespace=namespace)
    if patch is not None:
        await client.patch(DAEMONSETS, HANDLER_DAEMONSET, patch, namespace=namespace)
        log.info("handler_migration_network_set", network=network, namespace=namespace)
    return None
