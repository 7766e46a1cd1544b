"""The argument parser: kubectl-style global flags, one subcommand per verb."""

from __future__ import annotations

import argparse

from shared.model import RunStrategy


def _globals(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kubeconfig", help="path to the kubeconfig (default: $KUBECONFIG, ~/.kube/config)"
    )
    p.add_argument("--context", help="kubeconfig context to use")
    p.add_argument("-n", "--namespace", help="namespace (default: the context's, else default)")


def _waiting(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wait", action="store_true", help="wait until the change took effect")
    p.add_argument("--timeout", type=float, default=300, help="seconds to wait (with --wait)")


def _dry_run(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dry-run", action="store_true", help="check the request without changing anything"
    )


def build() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="virtctl-py", description="Manage kubevirt-py virtual machines."
    )
    _globals(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for verb, text in (("start", "start a VM"), ("stop", "stop a VM"), ("restart", "restart a VM")):
        p = sub.add_parser(verb, help=text)
        p.add_argument("name")
        _waiting(p)
        _dry_run(p)
        if verb == "start":
            p.add_argument("--paused", action="store_true", help="start the VM paused")
        else:
            p.add_argument("--force", action="store_true", help="with --grace-period")
            p.add_argument(
                "--grace-period", type=int, default=-1,
                help="seconds before the VM is killed (with --force; restart takes 0 only)",
            )  # fmt: skip
    for verb, text in (("pause", "pause a VM or VMI"), ("unpause", "unpause a VM or VMI")):
        p = sub.add_parser(verb, help=text)
        p.add_argument("kind", choices=["vm", "vmi"])
        p.add_argument("name")
    sub.add_parser("soft-reboot", help="reboot a VMI through ACPI").add_argument("name")
    p = sub.add_parser("migrate", help="live-migrate a VM's VMI to another node")
    p.add_argument("name")
    _waiting(p)
    _dry_run(p)
    sub.add_parser("migrate-cancel", help="cancel a VM's migration in progress").add_argument(
        "name"
    )
    p = sub.add_parser("console", help="connect to a VMI's serial console (escape: Ctrl+])")
    p.add_argument("name")
    p.add_argument("--timeout", type=float, default=30, help="seconds to wait for the connection")
    for verb, text in (
        ("guestosinfo", "guest OS info from the guest agent"),
        ("userlist", "users logged in to the guest"),
        ("fslist", "guest filesystems"),
    ):
        p = sub.add_parser(verb, help=text)
        p.add_argument("name")
        p.add_argument(
            "-o",
            "--output",
            choices=["table", "json", "yaml"],
            default="json" if verb == "guestosinfo" else "table",
        )
    _create(sub)
    _expose(sub)
    sub.add_parser("version", help="client and server versions")
    p = sub.add_parser("completion", help="print a shell completion script")
    p.add_argument("shell", choices=["bash"])
    return parser


def _create(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    create = sub.add_parser("create", help="emit a manifest")
    kinds = create.add_subparsers(dest="kind", required=True)
    p = kinds.add_parser("vm", help="a VirtualMachine manifest from flags (apply it with kubectl)")
    p.add_argument("--name", required=True)
    p.add_argument("--memory", default="128Mi")
    p.add_argument("--cpus", type=int, default=1)
    p.add_argument(
        "--run-strategy", type=RunStrategy, choices=list(RunStrategy), default=RunStrategy.ALWAYS
    )
    p.add_argument("--container-disk", help="a containerDisk image reference")
    p.add_argument(
        "--kernel-image", help="an image with /boot/vmlinuz and /boot/initrd.img (kernelBoot)"
    )
    p.add_argument("--kernel-args", default="console=ttyS0")
    p.add_argument("--user-data", help="cloud-init user-data (NoCloud)")
    p.add_argument("--grace", type=int, default=30, help="terminationGracePeriodSeconds")


def _expose(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("expose", help="create a Service for a VM or VMI")
    p.add_argument("kind", choices=["vm", "vmi"])
    p.add_argument("name")
    p.add_argument("--name", dest="service_name", required=True, help="the Service's name")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--target-port", type=int)
    p.add_argument("--type", default="ClusterIP", choices=["ClusterIP", "NodePort", "LoadBalancer"])


def bash_completion(parser: argparse.ArgumentParser) -> str:
    """A bash completion script for the verbs and their flags."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    verbs = " ".join(sub.choices)
    flags = "--kubeconfig --context --namespace --wait --timeout --output"
    return f"""# virtctl-py bash completion: eval "$(virtctl-py completion bash)"
_virtctl_py() {{
  local cur=${{COMP_WORDS[COMP_CWORD]}}
  if [ "$COMP_CWORD" -eq 1 ]; then COMPREPLY=($(compgen -W "{verbs}" -- "$cur")); return; fi
  case "${{COMP_WORDS[1]}}" in
    pause|unpause|expose) [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W "vm vmi" -- "$cur")) ;;
    create) [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W "vm" -- "$cur")) ;;
    *) COMPREPLY=($(compgen -W "{flags}" -- "$cur")) ;;
  esac
}}
complete -F _virtctl_py virtctl-py kubectl-virt
"""
