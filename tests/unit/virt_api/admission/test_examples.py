"""Every manifest under examples/ is honoured exactly or refused naming the field, with
admission run in process (the same check through a real kube-apiserver with the webhooks
is tests/integration/conformance): defaults, then validation under emulation; admitted
VMIs through the launcher's planner, XML builder and virt-xml-validate, and the template."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shared.model.validation import ValidationLimits
from tests.integration.conformance.checks import (
    Doc,
    domain_xml,
    example_docs,
    honoured_problems,
    refusal_problems,
    schema_problems,
    vmi_of,
)
from virt_api.admission.defaults import Defaults, mutate
from virt_api.admission.validate import validate

DOCS = example_docs()
TCG = ValidationLimits(emulation=True)


def _admit(obj: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """(the defaulted object, the refusal message or "")."""
    admitted = dict(obj)
    for op in mutate(obj["kind"], obj, Defaults()):
        admitted["spec"] = op["value"]
    errors = validate(obj["kind"], admitted, limits=TCG)
    return admitted, "; ".join(f"{e.path}: {e.message}" for e in errors)


def _same_file(doc: Doc) -> dict[tuple[str, str], Any]:
    return {d.key: _admit(d.obj)[0] for d in DOCS if d.path == doc.path}


@pytest.mark.parametrize("doc", DOCS, ids=[d.id for d in DOCS])
async def test_example_is_honoured_or_refused_naming_the_field(doc: Doc, tmp_path: Path) -> None:
    """Refused ones name each listed field; admitted ones render to schema-valid XML that,
    with the launcher pod, carries every field as written."""
    admitted, message = _admit(doc.obj)
    if doc.refused_paths:
        assert message, f"{doc.id} was admitted"
        assert refusal_problems(doc, message) == []
        return
    assert message == ""
    raw_vmi = vmi_of(admitted, _same_file(doc))
    if raw_vmi is None:
        return
    vmi, xml = await domain_xml(raw_vmi, tmp_path)
    assert schema_problems(xml, tmp_path) == []
    assert honoured_problems(vmi, xml) == []


def test_the_examples_cover_both_sides() -> None:
    """The conformance manifests hold admitted and refused documents of every kind."""
    kinds_refused = {d.obj["kind"] for d in DOCS if d.refused_paths}
    kinds_admitted = {d.obj["kind"] for d in DOCS if not d.refused_paths}
    assert {"VirtualMachineInstance", "VirtualMachinePreference"} <= kinds_refused
    assert {"VirtualMachineInstance", "VirtualMachine", "VirtualMachineInstancetype"} <= (
        kinds_admitted
    )
