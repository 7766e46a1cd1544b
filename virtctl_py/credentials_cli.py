"""The `credentials` verb's flags (KubeVirt v1.8 virtctl's): argparse only, so parsing the
command line stays cheap; virtctl_py/credentials.py does the work.

`-u/--user` is the guest user here, as in KubeVirt's virtctl, where it shadows kubectl's
--user: the sub-verbs take the connection flags from a fresh copy (`common`) whose --user
they replace, so every other verb keeps kubectl's.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def _base(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="the VirtualMachine")
    p.add_argument("-u", "--user", dest="guest_user", required=True, help="Name of the user.")
    p.add_argument("--secret", help="Name of the secret with SSH keys.")
    p.add_argument(
        "--force",
        action="store_true",
        help="Force update of secret, even if it's not owned by the VM.",
    )


def _key(p: argparse.ArgumentParser) -> None:
    source = p.add_mutually_exclusive_group()
    source.add_argument("-f", "--file", help="Path to the SSH public key file.")
    source.add_argument("--value", help="Literal value of the SSH public key.")


def add(p: argparse.ArgumentParser, common: Callable[[], argparse.ArgumentParser]) -> None:
    """add-ssh-key, remove-ssh-key and set-password under `p`."""
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, text: str) -> argparse.ArgumentParser:
        return actions.add_parser(name, help=text, parents=[common()], conflict_handler="resolve")

    adding = action("add-ssh-key", "Add credentials to a virtual machine.")
    _base(adding)
    _key(adding)
    new = adding.add_mutually_exclusive_group()
    new.add_argument(
        "--create-secret", action="store_true",
        help="Create a new secret for the SSH key (refused while the VM runs, unless --force).",
    )  # fmt: skip
    new.add_argument(
        "--update-secret", action="store_true", help="Add the SSH key to an existing secret."
    )
    removing = action("remove-ssh-key", "Remove credentials from a virtual machine.")
    _base(removing)
    _key(removing)
    password = action("set-password", "Set password for a user")
    _base(password)
    password.add_argument("-p", "--password", required=True, help="Password for the user")
