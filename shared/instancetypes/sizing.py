"""An instancetype applied to a VMI spec (KubeVirt's pkg/instancetype/apply): its vCPUs
laid out by the preference's topology, its guest memory (and the pod's request when it
overcommits), and every other field it carries. The instancetype owns what it sets: a
template setting the same field is a conflict, named, and nothing is applied then."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from shared.instancetypes.target import Origin, Source, Target, is_set
from shared.model.errors import FieldError, QuantityError
from shared.model.instancetype import InstancetypeSpec
from shared.model.preference import PreferenceSpec, PreferredCPUTopology, SpreadAcross
from shared.model.quantity import format_bytes, parse_quantity

# (instancetype wire keys, VMI spec wire keys): copied when the instancetype sets them;
# a template setting them too conflicts.
OWNED: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("nodeSelector",), ("nodeSelector",)),
    (("schedulerName",), ("schedulerName",)),
    (("cpu", "model"), ("domain", "cpu", "model")),
    (("cpu", "dedicatedCPUPlacement"), ("domain", "cpu", "dedicatedCpuPlacement")),
    (("cpu", "isolateEmulatorThread"), ("domain", "cpu", "isolateEmulatorThread")),
    (("cpu", "numa"), ("domain", "cpu", "numa")),
    (("cpu", "realtime"), ("domain", "cpu", "realtime")),
    (("cpu", "maxSockets"), ("domain", "cpu", "maxSockets")),
    (("memory", "hugepages"), ("domain", "memory", "hugepages")),
    (("memory", "maxGuest"), ("domain", "memory", "maxGuest")),
    (("ioThreadsPolicy",), ("domain", "ioThreadsPolicy")),
    (("ioThreads",), ("domain", "ioThreads")),
    (("launchSecurity",), ("domain", "launchSecurity")),
    (("gpus",), ("domain", "devices", "gpus")),
    (("hostDevices",), ("domain", "devices", "hostDevices")),
)
# VMI spec wire keys an instancetype always sets (cpu.guest and memory.guest are required).
SIZED: tuple[tuple[str, ...], ...] = (
    ("domain", "cpu", "sockets"),
    ("domain", "cpu", "cores"),
    ("domain", "cpu", "threads"),
    ("domain", "memory", "guest"),
    ("domain", "resources", "requests", "cpu"),
    ("domain", "resources", "limits", "cpu"),
    ("domain", "resources", "requests", "memory"),
    ("domain", "resources", "limits", "memory"),
)
_DEFAULT_SPREAD_RATIO = 2
_THREADS_PER_CORE = 2


def _origin(*keys: str) -> Origin:
    return Origin(source=Source.INSTANCETYPE, field=".".join(("spec", *keys)))


def preferred_topology(preference: PreferenceSpec | None) -> PreferredCPUTopology:
    """The preference's topology (sockets when unset), deprecated spellings normalised."""
    topology = preference.cpu.preferred_cpu_topology if preference else None
    if topology is None:
        return PreferredCPUTopology.SOCKETS
    return PreferredCPUTopology(topology.value.removeprefix("prefer").lower())


def spread_options(preference: PreferenceSpec) -> tuple[int, SpreadAcross]:
    """(ratio, across) of a spread topology, KubeVirt's defaults (2, SocketsCores)."""
    ratio = preference.prefer_spread_socket_to_core_ratio or _DEFAULT_SPREAD_RATIO
    across = SpreadAcross.SOCKETS_CORES
    options = preference.cpu.spread_options
    if options is not None:
        across = options.across or across
        ratio = options.ratio or ratio
    return ratio, across


def topology(vcpus: int, preference: PreferenceSpec | None) -> tuple[int, int, int]:
    """(sockets, cores, threads) for `vcpus` as KubeVirt lays them out."""
    if vcpus <= 1:
        return 1, 1, 1
    match preferred_topology(preference):
        case PreferredCPUTopology.CORES:
            return 1, vcpus, 1
        case PreferredCPUTopology.THREADS:
            return 1, 1, vcpus
        case PreferredCPUTopology.SPREAD:
            assert preference is not None  # spread is never the default
            return _spread(vcpus, preference)
    return vcpus, 1, 1


def _spread(vcpus: int, preference: PreferenceSpec) -> tuple[int, int, int]:
    ratio, across = spread_options(preference)
    if across == SpreadAcross.CORES_THREADS:
        return 1, vcpus // ratio, ratio
    if across == SpreadAcross.SOCKETS_CORES_THREADS:
        return vcpus // _THREADS_PER_CORE // ratio, ratio, _THREADS_PER_CORE
    return vcpus // ratio, ratio, 1


# KubeVirt's refusals of a spread the instancetype's vCPUs cannot fill evenly.
SPREAD_PATH = "instancetype.spec.cpu.guest"
_SPREAD_SOCKETS_CORES = (
    "{vcpus} vCPUs provided by the instance type are not divisible by the "
    "Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of {ratio} "
    "provided by the preference"
)
_SPREAD_CORES_THREADS = (
    "{vcpus} vCPUs provided by the instance type are not divisible by the number of threads "
    "per core {ratio}"
)
_SPREAD_ALL = (
    "{vcpus} vCPUs provided by the instance type are not divisible by the number of threads "
    "per core {threads} and Spec.PreferSpreadSocketToCoreRatio or "
    "Spec.CPU.PreferSpreadOptions.Ratio of {ratio}"
)


def spread_error(vcpus: int, preference: PreferenceSpec | None) -> str | None:
    """KubeVirt's refusal of a spread `vcpus` cannot fill evenly, None when fine."""
    if preference is None or preferred_topology(preference) != PreferredCPUTopology.SPREAD:
        return None
    ratio, across = spread_options(preference)
    if across == SpreadAcross.SOCKETS_CORES_THREADS:
        if vcpus % _THREADS_PER_CORE or (vcpus // _THREADS_PER_CORE) % ratio:
            return _SPREAD_ALL.format(vcpus=vcpus, threads=_THREADS_PER_CORE, ratio=ratio)
        return None
    if vcpus % ratio:
        fmt = (
            _SPREAD_CORES_THREADS if across == SpreadAcross.CORES_THREADS else _SPREAD_SOCKETS_CORES
        )
        return fmt.format(vcpus=vcpus, ratio=ratio)
    return None


def _overcommitted(guest: str | int, percent: int) -> str | None:
    """The pod's memory request for `guest` overcommitted by `percent`."""
    try:
        value = parse_quantity(guest)
    except QuantityError:
        return None  # validation names it
    return format_bytes(int(value * (1 - Fraction(percent, 100))))


def _owned_conflicts(target: Target, raw: dict[str, Any]) -> None:
    for keys in SIZED:
        if is_set(target.get(*keys)):
            target.conflict(*keys)
    for source, dest in OWNED:
        if is_set(_get(raw, source)) and is_set(target.get(*dest)):
            target.conflict(*dest)
    for key, value in sorted(dict(raw.get("annotations") or {}).items()):
        target.annotate(key, value, owned=True)


def _get(raw: dict[str, Any], keys: tuple[str, ...]) -> Any:
    value: Any = raw
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def apply_instancetype(
    target: Target, spec: InstancetypeSpec, preference: PreferenceSpec | None
) -> None:
    """Apply `spec` to `target`; conflicts recorded instead (and nothing applied)."""
    raw = spec.to_dict()
    _owned_conflicts(target, raw)
    if target.conflicts:
        return
    for source, dest in OWNED:
        value = _get(raw, source)
        if is_set(value):
            target.put(dest, value, _origin(*source))
    if spec.cpu.guest is not None:
        spread = spread_error(spec.cpu.guest, preference)
        if spread is not None:
            target.conflicts.append(FieldError(path=SPREAD_PATH, message=spread))
            return
        sockets, cores, threads = topology(spec.cpu.guest, preference)
        for key, count in (("sockets", sockets), ("cores", cores), ("threads", threads)):
            target.put(("domain", "cpu", key), count, _origin("cpu", "guest"))
    guest = spec.memory.guest
    if guest is not None:
        target.put(("domain", "memory", "guest"), guest, _origin("memory", "guest"))
        percent = spec.memory.overcommit_percent
        request = _overcommitted(guest, percent) if percent else None
        if request is not None:
            keys = ("domain", "resources", "requests", "memory")
            target.put(keys, request, _origin("memory", "overcommitPercent"))
