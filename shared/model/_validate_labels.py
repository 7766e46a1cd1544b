"""Kubernetes label syntax for maps of node labels a user hands us (a VMIM's
spec.addedNodeSelector): refused at admission naming the key, not by the scheduler later."""

from __future__ import annotations

import re
from collections.abc import Mapping

from shared.model._validate_common import DNS1123_SUBDOMAIN, MAX_NAME_LENGTH, Errors

# A label name, and a label value when not empty: alphanumerics, '-', '_' and '.' inside.
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
MAX_PREFIX_LENGTH = 253
_NAME_RULE = (
    "at most 63 characters: letters, digits, '-', '_' and '.', "
    "starting and ending with a letter or digit"
)


def _key_problem(key: str) -> str | None:
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "the prefix before '/' must not be empty"
    if prefix and (len(prefix) > MAX_PREFIX_LENGTH or not DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return "the prefix must be a DNS-1123 subdomain of at most 253 characters"
    if len(name) > MAX_NAME_LENGTH or not _LABEL_NAME.fullmatch(name):
        return f"the name must be {_NAME_RULE}"
    return None


def check_label_map(errs: Errors, path: str, labels: Mapping[str, str]) -> None:
    """Every key is a qualified label key ([prefix/]name), every value a label value."""
    for key, value in labels.items():
        problem = _key_problem(key)
        if problem is not None:
            errs.add(f"{path}[{key}]", f"invalid label key: {problem}", key)
        if value and (len(value) > MAX_NAME_LENGTH or not _LABEL_NAME.fullmatch(value)):
            errs.add(f"{path}[{key}]", f"invalid label value: must be empty or {_NAME_RULE}", value)
