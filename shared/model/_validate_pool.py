"""Validation of a VirtualMachinePool's KubeVirt 1.8 policies: maxUnavailable (a count ≥ 0
or a percentage 0-100%), the selectionPolicy selectors of scaleInStrategy and
updateStrategy (a well-formed labelSelector; node selector requirements with a known
operator and the values it takes), autohealing.minFailingToStartDuration (a positive Go
duration), scaleInStrategy's statePreservation (a known value: the CRD's enum and the model's).
Each bad value names its field."""

from __future__ import annotations

import re

from shared.duration import go_duration
from shared.model._validate_common import Errors
from shared.model.pool import (
    PoolSelectors,
    PoolSpec,
    Strategy,
)

PERCENT = re.compile(r"(\d{1,3})%")
NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def validate_pool_policies(errs: Errors, spec: PoolSpec) -> None:
    """maxUnavailable, selectors and minFailingToStartDuration under spec."""
    _max_unavailable(errs, spec.max_unavailable)
    for key, strategy in (("scaleInStrategy", spec.scale_in_strategy),
                          ("updateStrategy", spec.update_strategy)):  # fmt: skip
        selectors = _selectors_of(strategy)
        if selectors is not None:
            where = f"spec.{key}.proactive.selectionPolicy.selectors"
            _selectors(errs, where, selectors)
    heal = spec.autohealing
    if heal is not None and heal.min_failing_to_start_duration is not None:
        where = "spec.autohealing.minFailingToStartDuration"
        text = heal.min_failing_to_start_duration
        try:
            if go_duration(text) <= 0:
                errs.add(where, "must be a positive duration", text)
        except ValueError:
            errs.add(where, "must be a Go duration (e.g. 5m, 90s, 1h30m)", text)


def _max_unavailable(errs: Errors, value: int | str | None) -> None:
    where = "spec.maxUnavailable"
    if isinstance(value, int) and value < 0:
        errs.add(where, "must be zero or more", value)
    elif isinstance(value, str):
        m = PERCENT.fullmatch(value)
        if m is None or int(m.group(1)) > 100:
            errs.add(where, "must be a count or a percentage from 0% to 100%", value)


def _selectors_of(strategy: Strategy | None) -> PoolSelectors | None:
    proactive = strategy.proactive if strategy is not None else None
    policy = proactive.selection_policy if proactive is not None else None
    return policy.selectors if policy is not None else None


def _selectors(errs: Errors, where: str, selectors: PoolSelectors) -> None:
    if selectors.label_selector is not None:
        for path, message in selectors.label_selector.problems():
            errs.add(f"{where}.labelSelector.{path}", message)
    for i, req in enumerate(selectors.node_selector_requirement_matcher):
        path = f"{where}.nodeSelectorRequirementMatcher[{i}]"
        if not req.key:
            errs.add(f"{path}.key", "is required")
        if req.operator not in NODE_OPERATORS:
            errs.add(f"{path}.operator", f"must be one of {', '.join(NODE_OPERATORS)}",
                     req.operator)  # fmt: skip
        elif req.operator in ("In", "NotIn") and not req.values:
            errs.add(f"{path}.values", f"must not be empty with {req.operator}")
        elif req.operator in ("Exists", "DoesNotExist") and req.values:
            errs.add(f"{path}.values", f"must be empty with {req.operator}", list(req.values))
        elif req.operator in ("Gt", "Lt") and (
            len(req.values) != 1 or not req.values[0].lstrip("-").isdigit()
        ):
            errs.add(f"{path}.values", f"must be one integer with {req.operator}",
                     list(req.values))  # fmt: skip
