"""client-go's REST client metrics, as KubeVirt exports them: requests by code, method,
host, resource and verb; latency by verb and URL template; time spent in the client-side
rate limiter."""

from __future__ import annotations

from shared.kube.metrics import Registry

RATE_LIMITER_BUCKETS = tuple(0.001 * 2**i for i in range(10))


class RestMetrics:
    """The client-go style request metrics every KubeClient request is counted in."""

    def __init__(self, registry: Registry) -> None:
        self.requests = registry.counter(
            "kubevirt_rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ("code", "method", "host", "resource", "verb"),
        )
        self.latency = registry.histogram(
            "kubevirt_rest_client_request_latency_seconds",
            "Request latency in seconds. Broken down by verb and URL.",
            ("verb", "url"),
        )
        self.limiter = registry.histogram(
            "kubevirt_rest_client_rate_limiter_duration_seconds",
            "Client side rate limiter latency in seconds. Broken down by verb and URL.",
            ("verb", "url"),
            buckets=RATE_LIMITER_BUCKETS,
        )
