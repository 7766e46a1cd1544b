"""Both virt-handlers SIGKILLed, ten times over, under a running VMI (issue 35's restart
trial): each time, an imperative action on that VMI (pause, then unpause on the next trial)
is served again, and the guest's QEMU is the one it was.

The time from the SIGKILL to the action's acceptance is printed per trial with the spread
(`HANDLER-RESTART …`, see `pytest -s`); the target (≤ 5 s every time) is a figure in
docs/hardening.md, not an assertion. A trial that is never served again within 120 s fails.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import statistics
import time

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_chaos import (
    _get,
    _handler_pid,
    _one_qemu,
    _running,
    _tiny,
)
from tests.integration.realnodes.test_story import _virtctl, _wait

pytestmark = [pytest.mark.cluster, pytest.mark.faults]
TRIALS = 10
SERVED_BOUND = 120.0  # a liveness bound, not the target


def _kill_handlers(k: Kubectl, nodes: tuple[str, ...]) -> float:
    """SIGKILL every node's virt-handler process; the moment of the last kill."""
    pids = [_wait(functools.partial(_handler_pid, k, n), 60, f"virt-handler on {n}") for n in nodes]
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    return time.monotonic()


def _served_after(cluster: Cluster, ns: str, verb: str, name: str, since: float) -> float:
    """Retry `virtctl-py <verb> vmi <name>` until it is accepted; seconds since `since`."""
    deadline = since + SERVED_BOUND
    last = ""
    while time.monotonic() < deadline:
        done = _virtctl(cluster.kubeconfig, ns, verb, "vmi", name)
        if done.returncode == 0:
            return time.monotonic() - since
        last = (done.stderr or done.stdout).strip()
        time.sleep(0.1)
    raise AssertionError(f"{verb} not served {SERVED_BOUND}s after the SIGKILL; last: {last}")


def _paused_is(k: Kubectl, name: str, ns: str, *, want: bool) -> bool:
    conds = _get(k, "vmi", name, ns).get("status", {}).get("conditions", [])
    return any(c["type"] == "Paused" and c["status"] == "True" for c in conds) == want


def test_both_handlers_sigkilled_ten_times_actions_served_again(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """Ten times: SIGKILL both handlers, then pause (or unpause) the running VMI until the
    action is accepted; each is accepted, the Paused condition follows it, and the VMI's one
    QEMU is the same process throughout."""
    k, ns, name = real_stack, real_namespace, "restart"
    nodes = tuple(real_cluster.config.nodes)
    k("apply", "-n", ns, "-f", "-", stdin=json.dumps(_tiny(name)))
    vmi = _running(k, name, ns)
    domain = f"{ns}_{name}"
    (qemu,) = _one_qemu(domain)
    took: list[float] = []
    for trial in range(TRIALS):
        verb = "pause" if trial % 2 == 0 else "unpause"
        since = _kill_handlers(k, nodes)
        took.append(_served_after(real_cluster, ns, verb, name, since))
        want = verb == "pause"
        _wait(
            functools.partial(_paused_is, k, name, ns, want=want),
            60, f"Paused={want} after trial {trial}",
            lambda: _get(k, "vmi", name, ns).get("status", {}).get("conditions"),
        )  # fmt: skip
    assert _one_qemu(domain) == [qemu], "the guest's QEMU changed under the handler restarts"
    assert vmi["metadata"]["uid"] == _get(k, "vmi", name, ns)["metadata"]["uid"]
    spread = ", ".join(f"{t:.1f}" for t in took)
    print(
        f"HANDLER-RESTART {TRIALS} trials: served again after [{spread}] s; "
        f"median {statistics.median(took):.1f} s, max {max(took):.1f} s, "
        f"within 5 s: {sum(t <= 5 for t in took)}/{TRIALS}"
    )
