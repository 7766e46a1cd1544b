"""The migration network: the contract between the controller (virt-operator's part: it
puts the KubeVirt CR's `spec.configuration.migrations.network` on the handler DaemonSet's
pods as a multus network named `migration0`) and virt-handler (whose migration proxy
listens and dials on that interface's address instead of the pod IP).

As in KubeVirt, the network is a NetworkAttachmentDefinition in the KubeVirt CR's own
namespace (the install namespace), and the interface is always `migration0`.
"""

from __future__ import annotations

import json

from shared.model import FieldError
from shared.model._validate_common import DNS1123_SUBDOMAIN

INTERFACE = "migration0"
FIELD = "spec.configuration.migrations.network"
HANDLER_DAEMONSET = "virt-handler"
MAX_NAME = 253


def check_network(errors: list[FieldError], value: str) -> str | None:
    """The network a CR names (None when set empty: the pod network), or None with a
    FieldError when it is not a NetworkAttachmentDefinition name."""
    if not value:
        return None
    if "/" in value:
        message = "must be the name of a NetworkAttachmentDefinition in the KubeVirt CR's namespace"
        errors.append(FieldError(path=FIELD, message=message, value=value))
        return None
    if len(value) > MAX_NAME or not DNS1123_SUBDOMAIN.fullmatch(value):
        message = "must be a NetworkAttachmentDefinition name (a DNS-1123 subdomain)"
        errors.append(FieldError(path=FIELD, message=message, value=value))
        return None
    return value


def handler_networks(network: str, *, namespace: str) -> str:
    """The handler pods' `k8s.v1.cni.cncf.io/networks` annotation for `network`."""
    entry = {"name": network, "namespace": namespace, "interface": INTERFACE}
    return json.dumps([entry], separators=(",", ":"))
