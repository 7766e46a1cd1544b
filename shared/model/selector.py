"""metav1.LabelSelector: matchLabels and matchExpressions, matching label sets and rendered
as the selector string Kubernetes shows in status.labelSelector (the scale subresource's
labelSelectorPath, what an HPA lists by).

An empty selector matches everything; a missing one (None) matches nothing, as
metav1.LabelSelectorAsSelector has it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from shared.model._codec import Model


class SelectorOperator(enum.StrEnum):
    """metav1.LabelSelectorOperator."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelSelectorRequirement(Model):
    """matchExpressions[]: key, operator and values."""

    key: str | None = None
    operator: SelectorOperator | None = None
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a label set satisfies this requirement."""
        key = self.key or ""
        match self.operator:
            case SelectorOperator.IN:
                return key in labels and labels[key] in self.values
            case SelectorOperator.NOT_IN:
                return key not in labels or labels[key] not in self.values
            case SelectorOperator.EXISTS:
                return key in labels
            case SelectorOperator.DOES_NOT_EXIST:
                return key not in labels
        return False

    def render(self) -> str:
        """The requirement in selector syntax ("k in (a,b)", "!k", "k")."""
        key = self.key or ""
        values = ",".join(sorted(self.values))
        match self.operator:
            case SelectorOperator.IN:
                return f"{key} in ({values})"
            case SelectorOperator.NOT_IN:
                return f"{key} notin ({values})"
            case SelectorOperator.DOES_NOT_EXIST:
                return f"!{key}"
        return key


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelSelector(Model):
    """metav1.LabelSelector."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a label set is selected (every label and expression holds)."""
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        return all(req.matches(labels) for req in self.match_expressions)

    def render(self) -> str:
        """Kubernetes' selector string: requirements sorted by key, comma-separated."""
        parts = [(k, f"{k}={v}") for k, v in self.match_labels.items()]
        parts += [(req.key or "", req.render()) for req in self.match_expressions]
        return ",".join(text for _, text in sorted(parts))

    def problems(self) -> list[tuple[str, str]]:
        """(field path below the selector, message) for each malformed expression."""
        out = []
        for i, req in enumerate(self.match_expressions):
            where = f"matchExpressions[{i}]"
            if not req.key:
                out.append((f"{where}.key", "a key is required"))
            if req.operator is None:
                out.append((f"{where}.operator", "an operator is required"))
            valued = req.operator in (SelectorOperator.IN, SelectorOperator.NOT_IN)
            if valued and not req.values:
                out.append((f"{where}.values", f"{req.operator} needs at least one value"))
            if not valued and req.values:
                out.append((f"{where}.values", f"{req.operator} takes no values"))
        return out
