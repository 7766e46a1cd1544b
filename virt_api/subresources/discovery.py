"""Discovery documents of subresources.kubevirt.io/v1, as kube-apiserver and kubectl read them.

kube-apiserver's aggregator asks `/apis` (it falls back from aggregated discovery to these
legacy documents) and the availability controller polls `/apis/<group>/<version>`; the
answer must be a 2xx for the APIService to be Available. `version` and `healthz` are
served beside the resources but, as in KubeVirt, not listed as resources.
"""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Any

from shared.actions import ALL_ACTIONS, GROUP, GROUP_VERSION, TOP_LEVEL, VERSION

DISTRIBUTION = "kubevirt-py"
KINDS = {"virtualmachineinstances": "VirtualMachineInstance", "virtualmachines": "VirtualMachine"}


def _group() -> dict[str, Any]:
    version = {"groupVersion": GROUP_VERSION, "version": VERSION}
    return {"name": GROUP, "versions": [version], "preferredVersion": version}


def api_group_list() -> dict[str, Any]:
    """GET /apis."""
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group()]}


def api_group() -> dict[str, Any]:
    """GET /apis/subresources.kubevirt.io."""
    return {"kind": "APIGroup", "apiVersion": "v1", **_group()}


def api_resource_list() -> dict[str, Any]:
    """GET /apis/subresources.kubevirt.io/v1: one entry per action (VMI's, then VM's)."""
    resources = [
        {
            "name": f"{spec.resource}/{spec.action}",
            "singularName": "",
            "namespaced": True,
            "kind": KINDS[spec.resource],
            "verbs": [spec.verb],
        }
        for spec in ALL_ACTIONS
    ]
    resources += [
        {"name": name, "singularName": "", "namespaced": True, "kind": "", "verbs": [verb]}
        for name, verb in TOP_LEVEL.items()
    ]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": GROUP_VERSION,
        "resources": resources,
    }


def version_info() -> dict[str, Any]:
    """GET /apis/subresources.kubevirt.io/v1/version (virtctl version's server half)."""
    try:
        version = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        version = "0.0.0+source"
    return {
        "gitVersion": f"v{version}",
        "pythonVersion": platform.python_version(),
        "platform": f"{platform.system().lower()}/{platform.machine()}",
    }
