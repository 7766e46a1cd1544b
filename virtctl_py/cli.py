"""The argument parser: kubectl's connection flags anywhere on the line, one subcommand per verb.

Global flags are accepted before or after the verb (`virtctl-py start demo -n ns`): every
subparser shares them with SUPPRESS defaults, so a flag given after the verb wins and one
given before it is kept. Flag names and units follow upstream virtctl where a verb exists
in both (`create vm --volume-containerdisk`, `console --timeout` in minutes).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from virtctl_py import createobjects, credentials_cli

# KubeVirt's runStrategies (shared.model.RunStrategy; a test keeps the two equal): spelled
# out so that parsing the command line loads no model.
RUN_STRATEGIES = ("Always", "RerunOnFailure", "Manual", "Halted", "Once")


GLOBAL_DEFAULTS: dict[str, object] = {
    "kubeconfig": None, "context": None, "cluster": None, "user": None, "namespace": None,
    "server": None, "token": None, "impersonate": None, "impersonate_groups": None,
    "request_timeout": None, "insecure_skip_tls_verify": False,
}  # fmt: skip


def _common() -> argparse.ArgumentParser:
    """kubectl's connection flags, defaults suppressed (the top-level parser sets them)."""
    p = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    g = p.add_argument_group("connection (kubectl's flags)")
    g.add_argument("--kubeconfig", help="kubeconfig path (default: every $KUBECONFIG path, merged)")
    g.add_argument("--context", help="kubeconfig context to use")
    g.add_argument("--cluster", help="kubeconfig cluster to use")
    g.add_argument("--user", help="kubeconfig user to use")
    g.add_argument("-n", "--namespace", help="namespace (default: the context's, else default)")
    g.add_argument("-s", "--server", help="the API server's address and port")
    g.add_argument("--token", help="bearer token for the API server")
    g.add_argument("--as", dest="impersonate", help="user to impersonate")
    g.add_argument(
        "--as-group", dest="impersonate_groups", action="append", help="group to impersonate"
    )
    g.add_argument(
        "--request-timeout", help='time to wait for one request ("30s", "2m"; "0": no limit)'
    )
    g.add_argument(
        "--insecure-skip-tls-verify", action="store_true", help="do not verify the server's cert"
    )
    return p


def _waiting(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wait", action="store_true", help="wait until the change took effect")
    p.add_argument("--timeout", type=float, default=300, help="seconds to wait (with --wait)")


def _dry_run(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dry-run", action="store_true", help="check the request without changing anything"
    )


def build() -> argparse.ArgumentParser:
    # Two copies: set_defaults below changes the top-level actions' defaults, and the
    # subcommands' copies must stay SUPPRESS (or they would reset flags given before the verb).
    parser = argparse.ArgumentParser(
        prog="virtctl-py", description="Manage kubevirt-py virtual machines.", parents=[_common()]
    )
    parser.set_defaults(**GLOBAL_DEFAULTS)
    common = _common()
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def verb(name: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=text, parents=[common])

    _lifecycle(verb)
    for name, text in (("pause", "pause a VM or VMI"), ("unpause", "unpause a VM or VMI")):
        p = verb(name, text)
        p.add_argument("kind", choices=["vm", "vmi"])
        p.add_argument("name")
    verb("soft-reboot", "reboot a VMI through ACPI").add_argument("name")
    p = verb("migrate", "live-migrate a VM's VMI to another node")
    p.add_argument("name")
    _waiting(p)
    _dry_run(p)
    verb("migrate-cancel", "cancel a VM's migration in progress").add_argument("name")
    p = verb("console", "connect to a VMI's serial console (escape: Ctrl+])")
    p.add_argument("name")
    p.add_argument(
        "--timeout", type=float, default=5, help="minutes to wait for the VMI to be ready"
    )
    _vnc(verb("vnc", "open a VMI's VNC display (a local port for VNC clients)"))
    _port_forward(verb("port-forward", "forward local ports to a VMI's guest ports"))
    _ssh(verb("ssh", "ssh into a VMI (the system's ssh through port-forward)"), scp=False)
    _ssh(verb("scp", "copy files to or from a VMI (the system's scp)"), scp=True)
    _guest_queries(verb)
    _volumes(verb)
    _create(verb("create", "emit a manifest"), common)
    _expose(verb("expose", "create a Service for a VM or VMI"))
    _vmexport(verb("vmexport", "export a VM's or a claim's disks (create, delete, download)"))
    _memory_dump(
        verb("memory-dump", "dump a running VM's memory into a claim (get, download, remove)")
    )
    _image_upload(verb("image-upload", "upload a disk image into a new DataVolume or claim"))
    credentials_cli.add(verb("credentials", "SSH keys and passwords of a VM's guest"), _common)
    verb("version", "client and server versions")
    verb("completion", "print a shell completion script").add_argument(
        "shell", choices=["bash", "zsh"]
    )
    return parser


def _guest_queries(verb: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """guestosinfo, userlist, fslist: what the guest agent reports."""
    for name, text in (
        ("guestosinfo", "guest OS info from the guest agent"),
        ("userlist", "users logged in to the guest"),
        ("fslist", "guest filesystems"),
    ):
        p = verb(name, text)
        p.add_argument("name")
        p.add_argument(
            "-o", "--output", choices=["table", "json", "yaml"],
            default="json" if name == "guestosinfo" else "table",
        )  # fmt: skip


def _lifecycle(verb: object) -> None:
    assert callable(verb)
    for name, text in (("start", "start a VM"), ("stop", "stop a VM"), ("restart", "restart a VM")):
        p: argparse.ArgumentParser = verb(name, text)
        p.add_argument("name")
        _waiting(p)
        _dry_run(p)
        if name == "start":
            p.add_argument("--paused", action="store_true", help="start the VM paused")
        else:
            p.add_argument("--force", action="store_true", help="with --grace-period")
            p.add_argument(
                "--grace-period", type=int, default=-1,
                help="seconds before the VM is killed (with --force; restart takes 0 only)",
            )  # fmt: skip


def _volumes(verb: object) -> None:
    """addvolume / removevolume with upstream virtctl's flags."""
    assert callable(verb)
    for name, text in (
        ("addvolume", "hotplug a claim or DataVolume into a running VMI (--persist: its VM too)"),
        ("removevolume", "unplug a hotplugged volume (--persist: from its VM too)"),
    ):
        p: argparse.ArgumentParser = verb(name, text)
        p.add_argument("name", help="the VM or VMI")
        p.add_argument("--volume-name", required=True, help="the claim (and volume) name")
        p.add_argument("--persist", action="store_true", help="change the VM's template too")
        _dry_run(p)
        if name == "addvolume":
            p.add_argument("--serial", default="", help="the disk's serial (default: its name)")
            p.add_argument("--bus", default="scsi", choices=["scsi", "virtio"], help="disk bus")


def _create(create: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    kinds = create.add_subparsers(dest="kind", required=True)
    p = kinds.add_parser(
        "vm", help="a VirtualMachine manifest from flags (apply it with kubectl)", parents=[common]
    )
    p.add_argument("--name", required=True)
    p.add_argument("--memory", help="guest memory (default 128Mi without --instancetype)")
    p.add_argument("--cpus", type=int, help="cores (default 1 without --instancetype)")
    p.add_argument("--run-strategy", choices=RUN_STRATEGIES, default="Always")
    p.add_argument(
        "--volume-containerdisk", "--container-disk", dest="container_disks", action="append",
        default=[], metavar="src:IMAGE[,name:N][,bootorder:B]",
        help="a containerDisk volume (repeatable)",
    )  # fmt: skip
    p.add_argument(
        "--volume-pvc", dest="pvcs", action="append", default=[],
        metavar="src:PVC[,name:N][,bootorder:B]", help="a PersistentVolumeClaim volume",
    )  # fmt: skip
    p.add_argument(
        "--instancetype", help="[kind/]name (default kind virtualmachineclusterinstancetype)"
    )
    p.add_argument(
        "--preference", help="[kind/]name (default kind virtualmachineclusterpreference)"
    )
    for what in ("instancetype", "preference"):
        p.add_argument(
            f"--infer-{what}", nargs="?", const="true", choices=["true", "false"],
            help=f"infer the {what} from the first boot disk (default true, failures ignored)",
        )  # fmt: skip
        p.add_argument(f"--infer-{what}-from", metavar="VOLUME", help=f"infer the {what} from it")
    p.add_argument(
        "--kernel-image", help="an image with /boot/vmlinuz and /boot/initrd.img (kernelBoot)"
    )
    p.add_argument("--kernel-args", default="console=ttyS0")
    p.add_argument("--cloud-init-user-data", help="cloud-init user-data, base64-encoded")
    p.add_argument("--user-data", help="cloud-init user-data as plain text (kubevirt-py)")
    p.add_argument(
        "--termination-grace-period", "--grace", dest="grace", type=int, default=180,
        help="terminationGracePeriodSeconds",
    )  # fmt: skip
    createobjects.add_parsers(kinds, common)


def _vnc(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="the VMI (NAME or vmi/NAME)")
    p.add_argument(
        "--proxy-only", action="store_true",
        help='only listen and print {"port": N}; start no viewer',
    )  # fmt: skip
    p.add_argument("--port", type=int, default=0, help="local port (0: any free one)")
    p.add_argument("--address", default="127.0.0.1", help="local address to listen on")


def _port_forward(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", help="vmi/NAME[.NAMESPACE] or vm/NAME[.NAMESPACE]")
    p.add_argument("ports", nargs="+", help="[tcp/]LOCAL:REMOTE or [tcp/]PORT")
    p.add_argument("--address", default="127.0.0.1", help="local address to listen on")
    p.add_argument(
        "--stdio", action="store_true", help="one tunnel on stdin/stdout (ssh's ProxyCommand)"
    )


def _ssh(p: argparse.ArgumentParser, *, scp: bool) -> None:
    if scp:
        p.add_argument("paths", nargs="+", help="SOURCE... DESTINATION; the guest's side is "
                       "[user@]vmi/NAME[.NS]:PATH")  # fmt: skip
        p.add_argument("-r", "--recursive", action="store_true", help="copy directories")
    else:
        p.add_argument("destination", help="[user@]vmi/NAME[.NAMESPACE]")
        p.add_argument(
            "-c", "--command", dest="remote_command", help="run this command instead of a shell"
        )
    p.add_argument("-i", "--identity-file", help="the private key")
    p.add_argument("-l", "--username", help="the guest user (default: user@ or ssh's)")
    p.add_argument("-p", "--port", type=int, default=22, help="the guest's ssh port")
    p.add_argument(
        "-t", "--local-ssh-opts", action="append", default=[],
        help="an option for ssh/scp, e.g. -t '-o StrictHostKeyChecking=no' (repeatable)",
    )  # fmt: skip


def _expose(p: argparse.ArgumentParser) -> None:
    p.add_argument("kind", choices=["vm", "vmi"])
    p.add_argument("name")
    p.add_argument("--name", dest="service_name", required=True, help="the Service's name")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--target-port", type=int)
    p.add_argument("--type", default="ClusterIP", choices=["ClusterIP", "NodePort", "LoadBalancer"])


def _vmexport(p: argparse.ArgumentParser) -> None:
    """KubeVirt's virtctl vmexport flags (virtctl_py/vmexport.py)."""
    p.add_argument("action", choices=["create", "delete", "download"])
    p.add_argument("name", help="the VirtualMachineExport")
    p.add_argument("--vm", help="export this (stopped) VM's claims")
    p.add_argument("--pvc", help="export this claim")
    p.add_argument("--snapshot", help="export this VirtualMachineSnapshot (claims restored)")
    p.add_argument("--ttl", help="spec.ttlDuration, e.g. 1h (KubeVirt's default: 2h)")
    p.add_argument("--output", help="download: the file to write")
    p.add_argument("--volume", help="download: the volume (needed when there are several)")
    _download_flags(p)
    p.add_argument("--insecure", action="store_true", help="do not verify the exporter's cert")
    p.add_argument("--keep-vme", action="store_true", help="keep an export download created")
    p.add_argument("--delete-vme", action="store_true", help="delete the export after download")
    p.add_argument("--readiness-timeout", type=float, default=300, help="seconds to wait for Ready")


def _download_flags(p: argparse.ArgumentParser) -> None:
    """The flags of a download through an export (vmexport download, memory-dump --output)."""
    p.add_argument("--format", choices=["gzip", "raw"], default="gzip", help="download format")
    p.add_argument(
        "--port-forward", action="store_true",
        help="accepted for KubeVirt's virtctl; downloads always go through a port-forward",
    )  # fmt: skip
    p.add_argument("--local-port", type=int, default=0, help="local port (0: any free one)")


def _memory_dump(p: argparse.ArgumentParser) -> None:
    """KubeVirt's virtctl memory-dump flags (virtctl_py/memorydump.py)."""
    p.add_argument("action", choices=["get", "download", "remove"])
    p.add_argument("name", help="the VM")
    p.add_argument("--claim-name", help="the claim the dump goes to")
    p.add_argument("--create-claim", action="store_true", help="create the claim first")
    p.add_argument("--storage-class", help="--create-claim: the claim's StorageClass")
    p.add_argument("--access-mode", help="--create-claim: ReadWriteOnce (default) or ReadWriteMany")
    p.add_argument("--output", help="download the dump (a tar.gz of the claim) into this file")
    _download_flags(p)


def _image_upload(p: argparse.ArgumentParser) -> None:
    """KubeVirt's virtctl image-upload flags (virtctl_py/imageupload.py)."""
    p.add_argument("kind", choices=["dv", "pvc"], help="upload into a DataVolume or a claim")
    p.add_argument("name")
    p.add_argument("--image-path", required=True, help="the raw or qcow2 file to upload")
    p.add_argument("--size", help="the DataVolume's (or claim's) size, e.g. 64Mi")
    p.add_argument("--storage-class", help="the claim's StorageClass")
    p.add_argument("--access-mode", help="the claim's access mode")
    p.add_argument("--volume-mode", choices=["block", "filesystem"])
    p.add_argument("--no-create", action="store_true", help="upload into an existing one")
    p.add_argument("--wait-secs", type=float, default=300, help="seconds to wait for each phase")
    p.add_argument(
        "--insecure", action="store_true",
        help="accepted for KubeVirt's virtctl; uploads go through the API server's port-forward",
    )  # fmt: skip
    p.add_argument("--uploadproxy-url", help="accepted for KubeVirt's virtctl; not used")
