"""The container images the node agent can "pull".

There is no container runtime here. An entry-point image (IMAGES) is a name for a program
in the venv, run on the host's filesystem. Any other image registered in the local image
store (localkube/imagestore.py) is a *data image* (a containerDisk: files, no program):
its container runs its own command chrooted into a read-only view of the image's files
(runtime.py). An image that is neither fails its pod the way a failed pull does
(ErrImagePull).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from localkube.errors import LocalKubeError
from localkube.imagestore import ImageStore, ImageStoreError
from localkube.nodeagent.refs import ConfigError

PYTHON = "{python}"  # replaced by the venv's interpreter


@dataclass(frozen=True, slots=True, kw_only=True)
class Image:
    """An image repository (matched without registry, tag or digest) and its entry point."""

    repository: str
    entrypoint: tuple[str, ...]
    description: str


# The one table of images. A reference matches when its repository equals
# `repository` or ends with "/" + `repository` (any registry prefix, any tag).
IMAGES: tuple[Image, ...] = (
    Image(
        repository="kubevirt-py/virt-controller",
        entrypoint=(PYTHON, "-m", "controller"),
        description="virt-controller",
    ),
    Image(
        repository="kubevirt-py/virt-handler",
        entrypoint=(PYTHON, "-m", "handler"),
        description="virt-handler",
    ),
    Image(
        repository="kubevirt-py/virt-launcher",
        entrypoint=(PYTHON, "-m", "launcher"),
        description="virt-launcher",
    ),
    Image(
        repository="kubevirt-py/sleeper",
        entrypoint=(PYTHON, "-m", "localkube.sleeper"),
        description="sleeps until SIGTERM, then exits 0",
    ),
    Image(
        repository="kubevirt-py/python",
        entrypoint=(PYTHON,),
        description="the venv's python; runs the container's command/args",
    ),
)

# Commands a container may name in `command:` that resolve to venv programs (the repo
# is on PYTHONPATH, not installed, so the console scripts of pyproject.toml do not exist).
COMMANDS: dict[str, tuple[str, ...]] = {
    "python": (PYTHON,),
    "python3": (PYTHON,),
    **{
        name: (PYTHON, "-m", package)
        for package, names in {
            "controller": ("virt-controller", "virt-controller-py"),
            "handler": ("virt-handler", "virt-handler-py"),
            "launcher": ("virt-launcher", "virt-launcher-py"),
        }.items()
        for name in names
    },
}


class ImageNotFound(LocalKubeError):
    """The image has no local entry point (nor files in the store): the pod waits with
    ErrImagePull."""

    def __init__(self, image: str, *, store: Path | None = None) -> None:
        known = ", ".join(i.repository for i in IMAGES)
        where = f" or images in the local image store {store}" if store else ""
        super().__init__(
            f'image "{image}" is not available on this node: localkube runs only these '
            f"image repositories as local programs: {known}{where}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Launch:
    """What a container runs: its argv, and for a data image the image's root directory
    (in the store, never written) that the argv runs chrooted into."""

    argv: list[str]
    rootfs: Path | None = None


def resolve(
    image: str, command: Sequence[str], args: Sequence[str], *, python: Path, store: ImageStore
) -> Launch:
    """An entry-point image, else a data image from the store; ImageNotFound otherwise."""
    try:
        return Launch(argv=argv_for(image, command, args, python=python))
    except ImageNotFound:
        try:
            rootfs = store.rootfs(image)
        except ImageStoreError:
            raise ImageNotFound(image, store=store.root) from None
    if not command:
        raise ConfigError(f'image "{image}" has no entry point here: the container needs a command')
    return Launch(argv=[*command, *args], rootfs=rootfs)


def repository(image: str) -> str:
    """``reg:5000/a/b:tag@sha256:…`` → ``reg:5000/a/b``."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    return name


def lookup(image: str) -> Image:
    repo = repository(image)
    for entry in IMAGES:
        if repo == entry.repository or repo.endswith("/" + entry.repository):
            return entry
    raise ImageNotFound(image)


def argv_for(image: str, command: Sequence[str], args: Sequence[str], *, python: Path) -> list[str]:
    """The process to run, with Kubernetes' command/args-vs-entrypoint rules."""
    entry = lookup(image)
    if command:
        head = COMMANDS.get(command[0], (command[0],))
        argv = [*head, *command[1:], *args]
    else:
        argv = [*entry.entrypoint, *args]
    return [str(python) if part == PYTHON else part for part in argv]
