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

from shared.kube.api_types import DeleteOptions, ListResult, PatchType, WatchEvent, WatchEventType
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
    CSIDRIVERS,
    DATAVOLUMES,
    EVENTS,
    LEASES,
    NODES,
    PDBS,
    PODS,
    PVCS,
    SERVICES,
    STORAGECLASSES,
    VMI_ACTIONS,
    VMIMS,
    VMIS,
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

__all__ = [
    "CONTROLLER_RATE_LIMIT",
    "CSIDRIVERS",
    "DATAVOLUMES",
    "EVENTS",
    "HANDLER_RATE_LIMIT",
    "LEASES",
    "NAMESPACE_INDEX",
    "NODES",
    "NODE_INDEX",
    "OWNER_INDEX",
    "PDBS",
    "PODS",
    "PVCS",
    "SERVICES",
    "STORAGECLASSES",
    "VMIMS",
    "VMIS",
    "VMI_ACTIONS",
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
