"""KubeVirt's node-labeller keys: the contract between virt-handler, which labels its Node
with the CPU models and features its libvirt offers (handler/nodelabeller.py), and the
controller, which selects nodes by them for `cpu.model` and `cpu.features`
(controller/services/cpuselect.py). The keys are KubeVirt's, so selectors written for
KubeVirt (and KubeVirt's own tools) read them unchanged.
"""

from __future__ import annotations

import re

CPU_MODEL_PREFIX = "cpu-model.node.kubevirt.io/"
CPU_MODEL_MIGRATION_PREFIX = "cpu-model-migration.node.kubevirt.io/"
CPU_FEATURE_PREFIX = "cpu-feature.node.kubevirt.io/"
CPU_VENDOR_PREFIX = "cpu-vendor.node.kubevirt.io/"
HOST_MODEL_CPU_PREFIX = "host-model-cpu.node.kubevirt.io/"
HOST_MODEL_FEATURES_PREFIX = "host-model-required-features.node.kubevirt.io/"
OBSOLETE_HOST_MODEL_LABEL = "node-labeller.kubevirt.io/obsolete-host-model"

# Every key the labeller owns starts with one of these (it removes stale ones of these
# and touches no other label).
OWNED_PREFIXES = (
    CPU_MODEL_PREFIX,
    CPU_MODEL_MIGRATION_PREFIX,
    CPU_FEATURE_PREFIX,
    CPU_VENDOR_PREFIX,
    HOST_MODEL_CPU_PREFIX,
    HOST_MODEL_FEATURES_PREFIX,
    OBSOLETE_HOST_MODEL_LABEL,
)

# KubeVirt's default obsoleteCPUModels: usable models it never labels, so a VMI asking for
# one is not scheduled (its KubeVirt CR field of the same name is not read here yet).
DEFAULT_OBSOLETE_MODELS = frozenset(
    {
        "486", "pentium", "pentium2", "pentium3", "pentiumpro", "coreduo", "n270",
        "core2duo", "Conroe", "athlon", "phenom", "qemu64", "qemu32", "kvm64", "kvm32",
    }
)  # fmt: skip

# A label key's name part: at most 63 characters, alphanumerics at both ends.
_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")


def valid_name(name: str) -> bool:
    """`name` may follow one of the prefixes in a label key."""
    return bool(_NAME.fullmatch(name))


def owned(key: str) -> bool:
    """The node labeller owns label `key`."""
    return key.startswith(OWNED_PREFIXES)


def model_label(model: str) -> str:
    """The key a node carries when it runs CPU model `model`."""
    return CPU_MODEL_PREFIX + model


def feature_label(feature: str) -> str:
    """The key a node carries when its CPU offers `feature`."""
    return CPU_FEATURE_PREFIX + feature


# What virt-handler's `qemu-capabilities` init container leaves for the labeller, in this
# directory under the node's capability cache (launcher/nodecpu.py writes, the handler
# reads): libvirt's domcapabilities, and the host-model CPU with every feature spelled out.
NODE_CPU_DIR = "node-labeller"
DOMCAPS_FILE = "domcapabilities.xml"
FEATURES_FILE = "supported_features.xml"
