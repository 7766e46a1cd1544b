"""Where a quick verb's time goes: one `virtctl-py pause vmi` split into its phases, in a
fresh interpreter per sample (bench_cli.py runs it; the interpreter's own start is timed
apart as `python -c pass`).

    python cli_phases.py NAMESPACE VMI        (KUBECONFIG names the cluster)

Prints one JSON line of milliseconds: imports (what the verb's modules load), parse (the
command line), kubeconfig (read, resolved, the connection's credentials), connect (the TLS
context, TCP and the handshake with the client certificate), request (the PUT and its
answer: kube-apiserver, the aggregator, virt-api's SubjectAccessReview, the handler).
"""

from __future__ import annotations

import time

began = time.perf_counter()

import json
import os
import sys
from pathlib import Path

from virtctl_py import cli, commands, dispatch, rest, session


def main() -> None:
    marks = {"imports": time.perf_counter()}
    namespace, name = sys.argv[1], sys.argv[2]
    args = cli.build().parse_args(["pause", "vmi", name, "-n", namespace])
    marks["parse"] = time.perf_counter()
    with session.resolved(
        dispatch.overrides(args), kubeconfig_flag=None, environ=os.environ, home=Path.home()
    ) as target:
        conn = rest.connection(target.kubeconfig, context=target.context)
        marks["kubeconfig"] = time.perf_counter()
        api = rest.Rest(lambda: conn, timeout=target.request_timeout, headers=target.headers)
        api.connect()
        marks["connect"] = time.perf_counter()
        commands.action(api, target, args)
        marks["request"] = time.perf_counter()
        api.close()
    last, out = began, {}
    for phase, at in marks.items():
        out[phase] = round((at - last) * 1000, 2)
        last = at
    print(json.dumps(out))


if __name__ == "__main__":
    main()
