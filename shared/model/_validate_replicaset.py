"""What a VirtualMachineInstanceReplicaSet must be: a selector that selects its template's
labels, a replica count of zero or more, and a template that is a valid VMI (the VMI's own
rules, rooted at spec.template.spec)."""

from __future__ import annotations

from shared.model._validate_common import Errors, ValidationLimits, check_strings
from shared.model.errors import FieldError
from shared.model.replicaset import VirtualMachineInstanceReplicaSet
from shared.model.validation import _validate_metadata, validate_vmi_spec


def validate_replicaset(
    rs: VirtualMachineInstanceReplicaSet, *, limits: ValidationLimits
) -> list[FieldError]:
    """Every problem of a replica set, with its field path."""
    errs = Errors()
    _validate_metadata(errs, rs.metadata, name_required=False)
    spec = rs.spec
    if spec.replicas is not None and spec.replicas < 0:
        errs.add("spec.replicas", "must be zero or more", spec.replicas)
    if spec.selector is None:
        errs.add("spec.selector", "is required")
    else:
        for path, message in spec.selector.problems():
            errs.add(f"spec.selector.{path}", message)
        if not spec.selector.match_labels and not spec.selector.match_expressions:
            errs.add("spec.selector", "must select something (matchLabels or matchExpressions)")
    if spec.template is None:
        errs.add("spec.template", "is required")
        return errs.items
    labels = spec.template.metadata.labels
    check_strings(errs, "spec.template.metadata", spec.template.metadata.to_dict())
    if not labels:
        errs.add("spec.template.metadata.labels", "is required (the selector selects by them)")
    elif spec.selector is not None and not spec.selector.matches(labels):
        message = "selector does not match the template's labels"
        errs.add("spec.selector", message, spec.selector.render())
    return errs.items + validate_vmi_spec(spec.template.spec, path="spec.template.spec",
                                          limits=limits)  # fmt: skip
