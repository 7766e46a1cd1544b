"""Controller machinery shared by virt-controller and virt-handler, and the only door to
kubernetes-asyncio (imported in `transport` alone).

- `client`: typed facade (raw dicts, typed errors, QPS/burst limiter, REST metrics)
- `informer` + `store` + `listwatch`: list/watch caches with indexes and handlers
- `workqueue`: deduplicating, rate-limited queue with N workers
- `expectations`: creations/deletions in flight, so a lagging informer cannot cause doubles
- `leader`: Lease-based leader election
- `status`: the one place status is written (diffed, conflict-retried, counted)
- `events`: the corev1 Event recorder (rate-limited, aggregated, never blocking)
- `metrics` + `health`: Prometheus registry and the /metrics /healthz /readyz endpoint
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shared.kube.api_types import (
        DeleteOptions,
        ListResult,
        PatchType,
        WatchEvent,
        WatchEventType,
    )
    from shared.kube.client import ClientConfig, KubeClient
    from shared.kube.errors import (
        AlreadyExists,
        ApiError,
        BadRequest,
        ConfigError,
        Conflict,
        Expired,
        Forbidden,
        Gone,
        Invalid,
        KubeError,
        NotFound,
        ServerError,
        TooManyRequests,
        TransportError,
        Unauthorized,
    )
    from shared.kube.events import (
        DiscardRecorder,
        EventRecorder,
        EventType,
        Recorder,
        RecorderConfig,
    )
    from shared.kube.expectations import Expectations
    from shared.kube.health import HealthConfig, HealthServer, build_app, serving_tls
    from shared.kube.informer import Handlers, Informer, InformerConfig, Source, raw, wait_for_sync
    from shared.kube.leader import LeaderConfig, LeaderElector, LeadershipLost
    from shared.kube.listwatch import ListWatch, Selector
    from shared.kube.metrics import Counter, Gauge, Histogram, Registry
    from shared.kube.ratelimit import (
        CONTROLLER_RATE_LIMIT,
        HANDLER_RATE_LIMIT,
        BackoffPolicy,
        ItemBackoffPolicy,
        RateLimit,
        TokenBucket,
    )
    from shared.kube.resources import (
        EVENTS,
        KUBEVIRTS,
        LEASES,
        MIGRATION_POLICIES,
        NAMESPACES,
        NODES,
        PDBS,
        PODS,
        PVCS,
        SERVICES,
        VMI_ACTIONS,
        VMIMS,
        VMIRSS,
        VMIS,
        VMPOOLS,
        VMS,
        Resource,
        object_key,
        split_key,
    )
    from shared.kube.status import StatusWriter, StatusWriterConfig
    from shared.kube.store import (
        NAMESPACE_INDEX,
        NODE_INDEX,
        OWNER_INDEX,
        Store,
        by_namespace,
        by_node,
        by_owner_uid,
        default_indexers,
    )
    from shared.kube.workqueue import QueueConfig, WorkQueue

# name → the submodule that defines it; loaded on first use (PEP 562), so a process that
# needs only the client (the CLI) never imports the informer, health server or metrics.
_WHERE = {
    "AlreadyExists": "errors",
    "ApiError": "errors",
    "BackoffPolicy": "ratelimit",
    "BadRequest": "errors",
    "CONTROLLER_RATE_LIMIT": "ratelimit",
    "ClientConfig": "client",
    "ConfigError": "errors",
    "Conflict": "errors",
    "Counter": "metrics",
    "DeleteOptions": "api_types",
    "DiscardRecorder": "events",
    "EVENTS": "resources",
    "EventRecorder": "events",
    "EventType": "events",
    "Expectations": "expectations",
    "Expired": "errors",
    "Forbidden": "errors",
    "Gauge": "metrics",
    "Gone": "errors",
    "HANDLER_RATE_LIMIT": "ratelimit",
    "Handlers": "informer",
    "HealthConfig": "health",
    "HealthServer": "health",
    "Histogram": "metrics",
    "Informer": "informer",
    "InformerConfig": "informer",
    "Invalid": "errors",
    "ItemBackoffPolicy": "ratelimit",
    "KubeClient": "client",
    "KubeError": "errors",
    "KUBEVIRTS": "resources",
    "LEASES": "resources",
    "MIGRATION_POLICIES": "resources",
    "NAMESPACES": "resources",
    "LeaderConfig": "leader",
    "LeaderElector": "leader",
    "LeadershipLost": "leader",
    "ListResult": "api_types",
    "ListWatch": "listwatch",
    "NAMESPACE_INDEX": "store",
    "NODES": "resources",
    "NODE_INDEX": "store",
    "NotFound": "errors",
    "OWNER_INDEX": "store",
    "PDBS": "resources",
    "PODS": "resources",
    "PVCS": "resources",
    "PatchType": "api_types",
    "QueueConfig": "workqueue",
    "RateLimit": "ratelimit",
    "Recorder": "events",
    "RecorderConfig": "events",
    "Registry": "metrics",
    "Resource": "resources",
    "SERVICES": "resources",
    "Selector": "listwatch",
    "ServerError": "errors",
    "Source": "informer",
    "StatusWriter": "status",
    "StatusWriterConfig": "status",
    "Store": "store",
    "TokenBucket": "ratelimit",
    "TooManyRequests": "errors",
    "TransportError": "errors",
    "Unauthorized": "errors",
    "VMIMS": "resources",
    "VMIRSS": "resources",
    "VMPOOLS": "resources",
    "VMIS": "resources",
    "VMI_ACTIONS": "resources",
    "VMS": "resources",
    "WatchEvent": "api_types",
    "WatchEventType": "api_types",
    "WorkQueue": "workqueue",
    "build_app": "health",
    "by_namespace": "store",
    "by_node": "store",
    "by_owner_uid": "store",
    "default_indexers": "store",
    "object_key": "resources",
    "raw": "informer",
    "serving_tls": "health",
    "split_key": "resources",
    "wait_for_sync": "informer",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'shared.kube' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"shared.kube.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "CONTROLLER_RATE_LIMIT",
    "EVENTS",
    "HANDLER_RATE_LIMIT",
    "KUBEVIRTS",
    "LEASES",
    "MIGRATION_POLICIES",
    "NAMESPACES",
    "NAMESPACE_INDEX",
    "NODES",
    "NODE_INDEX",
    "OWNER_INDEX",
    "PDBS",
    "PODS",
    "PVCS",
    "SERVICES",
    "VMIMS",
    "VMIRSS",
    "VMIS",
    "VMI_ACTIONS",
    "VMPOOLS",
    "VMS",
    "AlreadyExists",
    "ApiError",
    "BackoffPolicy",
    "BadRequest",
    "ClientConfig",
    "ConfigError",
    "Conflict",
    "Counter",
    "DeleteOptions",
    "DiscardRecorder",
    "EventRecorder",
    "EventType",
    "Expectations",
    "Expired",
    "Forbidden",
    "Gauge",
    "Gone",
    "Handlers",
    "HealthConfig",
    "HealthServer",
    "Histogram",
    "Informer",
    "InformerConfig",
    "Invalid",
    "ItemBackoffPolicy",
    "KubeClient",
    "KubeError",
    "LeaderConfig",
    "LeaderElector",
    "LeadershipLost",
    "ListResult",
    "ListWatch",
    "NotFound",
    "PatchType",
    "QueueConfig",
    "RateLimit",
    "Recorder",
    "RecorderConfig",
    "Registry",
    "Resource",
    "Selector",
    "ServerError",
    "Source",
    "StatusWriter",
    "StatusWriterConfig",
    "Store",
    "TokenBucket",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "WatchEvent",
    "WatchEventType",
    "WorkQueue",
    "build_app",
    "by_namespace",
    "by_node",
    "by_owner_uid",
    "default_indexers",
    "object_key",
    "raw",
    "serving_tls",
    "split_key",
    "wait_for_sync",
]
