"""virtctl-py (also `kubectl virt`): KubeVirt's CLI verbs against the Kubernetes API only.

The entry point parses the command line with argparse alone; the client and the verbs
(virtctl_py.dispatch) load only for a command that needs them, so `--help` answers at once.
"""

from __future__ import annotations

from collections.abc import Sequence

from virtctl_py import cli, completion


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli.build()
    args = parser.parse_args(argv)
    if args.command == "completion":
        print(completion.script(parser, args.shell))
        return
    from virtctl_py import dispatch  # noqa: PLC0415 - the client loads only for a verb

    dispatch.execute(args)


if __name__ == "__main__":
    main()
