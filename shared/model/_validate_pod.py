"""Validation of the pod-level fields a VMI hands to its launcher pod (Kubernetes' own
rules, checked at admission so a bad value is named before any pod is made): names,
tolerations and DNS settings. affinity and topologySpreadConstraints are Kubernetes'
types kept whole; the API server checks them when the pod is made."""

from __future__ import annotations

from shared.model._validate_common import DNS1123_SUBDOMAIN, Errors, check_name
from shared.model.scheduling import DNSPolicy, TaintEffect, TolerationOperator
from shared.model.vmi import VMISpec

MAX_SUBDOMAIN = 253
MAX_NAMESERVERS = 3  # Kubernetes' limits for dnsConfig
MAX_SEARCHES = 32


def _subdomain(errs: Errors, path: str, value: str | None) -> None:
    if value is None:
        return
    if len(value) > MAX_SUBDOMAIN or not DNS1123_SUBDOMAIN.fullmatch(value):
        errs.add(path, "must be a DNS-1123 subdomain (lower-case, at most 253 characters)", value)


def _tolerations(errs: Errors, path: str, spec: VMISpec) -> None:
    for i, tol in enumerate(spec.tolerations):
        where = f"{path}.tolerations[{i}]"
        exists = tol.operator == TolerationOperator.EXISTS
        if not tol.key and tol.operator is not None and not exists:
            errs.add(f"{where}.operator", "must be Exists when key is empty", tol.operator)
        if exists and tol.value:
            errs.add(f"{where}.value", "must be empty when operator is Exists", tol.value)
        if tol.toleration_seconds is not None and tol.effect != TaintEffect.NO_EXECUTE:
            errs.add(
                f"{where}.tolerationSeconds",
                "is only allowed with effect NoExecute",
                tol.toleration_seconds,
            )


def _dns(errs: Errors, path: str, spec: VMISpec) -> None:
    config = spec.dns_config
    if spec.dns_policy == DNSPolicy.NONE and (config is None or not config.nameservers):
        errs.add(f"{path}.dnsConfig.nameservers", "dnsPolicy None needs at least one nameserver")
    if config is None:
        return
    if len(config.nameservers) > MAX_NAMESERVERS:
        errs.add(f"{path}.dnsConfig.nameservers", f"at most {MAX_NAMESERVERS} are allowed")
    if len(config.searches) > MAX_SEARCHES:
        errs.add(f"{path}.dnsConfig.searches", f"at most {MAX_SEARCHES} are allowed")
    for i, option in enumerate(config.options):
        if not option.name:
            errs.add(f"{path}.dnsConfig.options[{i}].name", "is required")


def validate_pod_fields(errs: Errors, path: str, spec: VMISpec) -> None:
    """priorityClassName / schedulerName subdomains, hostname / subdomain labels,
    tolerations and dnsConfig as Kubernetes checks them."""
    _subdomain(errs, f"{path}.priorityClassName", spec.priority_class_name)
    _subdomain(errs, f"{path}.schedulerName", spec.scheduler_name)
    if spec.hostname is not None:
        check_name(errs, f"{path}.hostname", spec.hostname)
    if spec.subdomain is not None:
        check_name(errs, f"{path}.subdomain", spec.subdomain)
    _tolerations(errs, path, spec)
    _dns(errs, path, spec)
