"""The mutating webhook's first step: an object of a kind it defaults must decode.

kube-apiserver calls mutating webhooks before it checks a custom resource against its
schema, so /mutate sees any JSON a client sends (`spec.template: 1.5`). KubeVirt's mutators
decode the object first and refuse it with the decoder's error; ours do the same with the
typed model's `ParseError`, which names the field. (The validating webhooks run after the
schema check, where x-kubernetes-preserve-unknown-fields parts may still be any shape:
`validate` parses them the same way.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.model import FieldError, ParseError, VirtualMachine, VirtualMachineInstance

_MODELS: dict[str, type[VirtualMachine] | type[VirtualMachineInstance]] = {
    VirtualMachine.KIND: VirtualMachine,
    VirtualMachineInstance.KIND: VirtualMachineInstance,
}


def shape_errors(kind: str, obj: Mapping[str, Any]) -> list[FieldError]:
    """The field whose value has the wrong shape for the model of `kind` ([] when it
    decodes, or when /mutate does not change that kind)."""
    model = _MODELS.get(kind)
    if model is None:
        return []
    try:
        model.from_dict(dict(obj))
    except ParseError as e:
        return [FieldError(path=e.path or "<root>", message=e.message)]
    return []
