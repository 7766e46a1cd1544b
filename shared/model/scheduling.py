"""The pod-level fields of a VMI spec that KubeVirt carries to the launcher pod as they
are: scheduling (nodeSelector lives on VMISpec itself, affinity, tolerations,
topologySpreadConstraints, schedulerName, priorityClassName) and the pod's DNS identity
(hostname, subdomain, dnsPolicy, dnsConfig).

`Affinity` and `TopologySpreadConstraint` are Kubernetes' own types, large and versioned
with Kubernetes: they are kept whole (in `extra`) and handed to the pod verbatim, so the
API server validates them with the pod. Tolerations and dnsConfig are small and typed, so
admission checks them itself.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from shared.model._codec import Model


class DNSPolicy(enum.StrEnum):
    """core/v1 DNSPolicy."""

    CLUSTER_FIRST_WITH_HOST_NET = "ClusterFirstWithHostNet"
    CLUSTER_FIRST = "ClusterFirst"
    DEFAULT = "Default"
    NONE = "None"


class TolerationOperator(enum.StrEnum):
    """core/v1 TolerationOperator."""

    EXISTS = "Exists"
    EQUAL = "Equal"


class TaintEffect(enum.StrEnum):
    """core/v1 TaintEffect."""

    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclass(frozen=True, slots=True, kw_only=True)
class Affinity(Model):
    """spec.affinity: a core/v1 Affinity, kept whole and given to the launcher pod."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologySpreadConstraint(Model):
    """spec.topologySpreadConstraints[]: core/v1, kept whole and given to the pod."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Toleration(Model):
    """spec.tolerations[]: a core/v1 Toleration."""

    key: str | None = None
    operator: TolerationOperator | None = None
    value: str | None = None
    effect: TaintEffect | None = None
    toleration_seconds: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PodDNSConfigOption(Model):
    """spec.dnsConfig.options[]."""

    name: str | None = None
    value: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PodDNSConfig(Model):
    """spec.dnsConfig: a core/v1 PodDNSConfig."""

    nameservers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[PodDNSConfigOption, ...] = ()
