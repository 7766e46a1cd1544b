"""KubeVirt's API group and version, in a module that imports nothing (the Kubernetes client
and the CLI's start need them without loading the whole model)."""

from __future__ import annotations

GROUP = "kubevirt.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
