"""What a VirtualMachineInstanceReplicaSet or a VirtualMachinePool must be: a selector that
selects its template's labels, a replica count of zero or more, and a template that is a
valid VMI (a replica set's, rooted at spec.template.spec) or VM (a pool's, rooted at
spec.virtualMachineTemplate.spec)."""

from __future__ import annotations

from collections.abc import Mapping

from shared.model._validate_common import Errors, ValidationLimits, check_strings
from shared.model._validate_pool import validate_pool_policies
from shared.model.errors import FieldError
from shared.model.meta import ObjectMeta
from shared.model.pool import VirtualMachinePool
from shared.model.replicaset import VirtualMachineInstanceReplicaSet
from shared.model.selector import LabelSelector
from shared.model.validation import _validate_metadata, validate_vm, validate_vmi_spec
from shared.model.vm import VirtualMachine


def validate_replicaset(
    rs: VirtualMachineInstanceReplicaSet, *, limits: ValidationLimits
) -> list[FieldError]:
    """Every problem of a replica set, with its field path."""
    errs = Errors()
    _validate_metadata(errs, rs.metadata, name_required=False)
    template = rs.spec.template
    _validate_selection(
        errs,
        replicas=rs.spec.replicas,
        selector=rs.spec.selector,
        template="spec.template",
        meta=template.metadata if template is not None else None,
    )
    if template is None:
        return errs.items
    return errs.items + validate_vmi_spec(template.spec, path="spec.template.spec",
                                          limits=limits)  # fmt: skip


def _validate_selection(
    errs: Errors,
    *,
    replicas: int | None,
    selector: LabelSelector | None,
    template: str,
    meta: ObjectMeta | None,
) -> None:
    """replicas ≥ 0, a well-formed selector, a template whose labels it selects."""
    if replicas is not None and replicas < 0:
        errs.add("spec.replicas", "must be zero or more", replicas)
    if selector is None:
        errs.add("spec.selector", "is required")
    else:
        for path, message in selector.problems():
            errs.add(f"spec.selector.{path}", message)
        if not selector.match_labels and not selector.match_expressions:
            errs.add("spec.selector", "must select something (matchLabels or matchExpressions)")
    if meta is None:
        errs.add(template, "is required")
        return
    labels: Mapping[str, str] = meta.labels
    check_strings(errs, f"{template}.metadata", meta.to_dict())
    if not labels:
        errs.add(f"{template}.metadata.labels", "is required (the selector selects by them)")
    elif selector is not None and not selector.matches(labels):
        message = "selector does not match the template's labels"
        errs.add("spec.selector", message, selector.render())


def validate_pool(pool: VirtualMachinePool, *, limits: ValidationLimits) -> list[FieldError]:
    """Every problem of a pool: its selection, and its template checked as a VM."""
    errs = Errors()
    _validate_metadata(errs, pool.metadata, name_required=False)
    template = pool.spec.virtual_machine_template
    where = "spec.virtualMachineTemplate"
    _validate_selection(
        errs,
        replicas=pool.spec.replicas,
        selector=pool.spec.selector,
        template=where,
        meta=template.metadata if template is not None else None,
    )
    validate_pool_policies(errs, pool.spec)
    if template is None:
        return errs.items
    vm = VirtualMachine(metadata=ObjectMeta(name=pool.name or "pool"), spec=template.spec)
    for e in validate_vm(vm, limits=limits):
        if not e.path.startswith("metadata"):  # the pool's own, checked above
            errs.add(f"{where}.{e.path}", e.message, e.value)
    return errs.items
