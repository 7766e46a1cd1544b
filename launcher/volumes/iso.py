"""ISO 9660 images of files (config volumes, cloud-init): built with genisoimage, Rock
Ridge and Joliet names, under a staging name renamed when complete."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from launcher.disks import run_tool


def graft(name: str, path: Path) -> str:
    r"""A genisoimage graft point `name=path` ('=' and '\' escaped in both)."""

    def esc(text: str) -> str:
        return text.replace("\\", "\\\\").replace("=", "\\=")

    return f"{esc(name)}={esc(str(path))}"


async def build_iso(
    out: Path, *, label: str, root: Path, grafts: Sequence[str] = (), what: str
) -> Path:
    """`root`'s tree plus `grafts` as an ISO at `out` labelled `label`; symlinks are
    followed (the kubelet's volumes are symlinks into a `..data` directory)."""
    staging = out.with_name(out.name + ".staging")
    staging.unlink(missing_ok=True)
    await run_tool(
        "genisoimage", "-quiet", "-output", str(staging), "-follow-links", "-volid", label,
        "-joliet", "-rock", "-graft-points", str(root), *grafts, what=what,
    )  # fmt: skip
    staging.replace(out)
    return out
