"""virt-api's servers, as one process starts them: the subresource API and the admission
webhooks, each only when its serving certificate is mounted.

    for name, server in servers(os.environ, client, registry, options=ServeOptions(...)):
        tg.create_task(server, name=name)

Every controller replica serves both (leadership gates only the reconcile loops).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, replace
from typing import Any

from shared.clusterconfig import ClusterConfig
from shared.kube import ClientConfig, KubeClient, Registry
from shared.model import EvictionStrategy
from virt_api.admission import AdmissionConfig, AdmissionServer
from virt_api.subresources import SubresourceConfig, SubresourceServer
from virt_api.subresources.authz import SarAuthorizer
from virt_api.upload.routes import uploads_for


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeOptions:
    """What virt-api takes from its host process's configuration."""

    # Guests may run under TCG: validation refuses what TCG cannot run.
    emulation: bool = True
    eviction_strategy: EvictionStrategy = EvictionStrategy.NONE
    # The live cluster configuration (the KubeVirt CR over the flags): feature gates.
    cluster: Callable[[], ClusterConfig] | None = None
    # The process's API client settings: the upload proxy's pods/portforward (None: no
    # upload API, upload.cdi.kubevirt.io is not served).
    client_config: ClientConfig | None = None


def servers(
    environ: Mapping[str, str],
    client: KubeClient,
    registry: Registry,
    *,
    options: ServeOptions,
) -> list[tuple[str, Coroutine[Any, Any, None]]]:
    """(task name, coroutine) for each server whose certificate is mounted."""
    found: list[tuple[str, Coroutine[Any, Any, None]]] = []
    subresources = SubresourceConfig.from_env(environ)
    if subresources is not None:
        uploads = None
        if options.client_config is not None:
            authorizer = SarAuthorizer(client, timeout=subresources.review_timeout)
            uploads = uploads_for(
                subresources.serving,
                authorizer=authorizer,
                pods=client,
                client_config=options.client_config,
            )
        server = SubresourceServer(subresources, client, registry, uploads=uploads)
        found.append(("subresources", server.run()))
    admission = AdmissionConfig.from_env(environ)
    if admission is not None:
        webhooks = AdmissionServer(
            replace(admission, emulation=options.emulation),
            client,
            registry,
            eviction_strategy=options.eviction_strategy,
            cluster=options.cluster,
        )
        found.append(("admission", webhooks.run()))
    return found
