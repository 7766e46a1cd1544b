"""The session's second real-node cluster with kubevirt-py on it (fixtures.py's
``peer_stack``), peered with the first (localkube/realnode/peering.py).

Its start (≈ 30 s: a one-node cluster, then a deploy) runs in a thread of its own once
``real_stack`` is up, when a collected test asks for ``peer_stack``, so that it overlaps
the tests before that one; ``peer_stack`` waits for it. Whatever happens, ``close`` waits
for the start to end and tears the cluster down (and the peering with it), once.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from localkube.cluster import Cluster
from localkube.deploy import Kubectl, deploy
from localkube.errors import LocalKubeError
from localkube.stopping import stop_signals
from localkube.testing import peer_session_cluster
from shared.clusterconfig import DECENTRALIZED_MIGRATION_GATE


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerStack:
    """The session's second cluster, peered with the first, kubevirt-py running on it."""

    kubectl: Kubectl
    cluster: Cluster
    node: str  # its one node
    certs: Path  # its deployment's certificates (``ca/`` is real_stack's)
    seconds: float  # how long it took to come up (cluster, peering, deploy)


class PeerStart:
    """Starts the peer stack (in a thread, or in the caller's when asked first), hands it
    over, tears it down."""

    def __init__(self, *, first: Cluster, ca: Path, certs: Path) -> None:
        self._first, self._ca, self._certs = first, ca, certs
        self._exits = contextlib.ExitStack()
        self._thread: threading.Thread | None = None
        self._stack: PeerStack | None = None
        self._error: BaseException | None = None
        self._closing = threading.Event()  # the session ends: no deploy after the cluster
        # Set when the start is over. Waited on instead of Thread.join: Python 3.11's join,
        # interrupted by a stop signal (localkube.stopping), marks the running thread as
        # stopped, and a later join then returns at once (the cluster torn down under it).
        self._done = threading.Event()

    def start(self) -> None:
        """Start it in the background (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="peer-stack", daemon=True)
            self._thread.start()

    def result(self) -> PeerStack:
        """The stack once up (started here if it was not); its start's error otherwise."""
        self.start()
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._stack is not None
        return self._stack

    def close(self) -> None:
        """Join the start (which stops short of the deploy once the cluster is up), then
        tear down what it started (nothing if it never started)."""
        self._closing.set()
        with stop_signals().tearing_down():  # a stop signal now forces (kills) instead
            if self._thread is not None:
                self._done.wait()
            self._exits.close()

    def _run(self) -> None:
        try:
            self._stack = self._up()
        except BaseException as e:  # handed to result() in the main thread
            self._error = e
        finally:
            self._done.set()

    def _up(self) -> PeerStack:
        started = time.monotonic()
        cluster = self._exits.enter_context(peer_session_cluster(self._first))
        if self._closing.is_set():
            raise LocalKubeError("the session ended before the peer cluster was up")
        kubectl = Kubectl(cluster.config.bin_dir / "kubectl", cluster.kubeconfig)
        shutil.copytree(self._ca, self._certs / "ca")
        deploy(kubectl, certs=self._certs, real_nodes=True, timeout=300)
        gate_on(kubectl, DECENTRALIZED_MIGRATION_GATE)
        seconds = round(time.monotonic() - started, 1)
        node = cluster.config.nodes[0]
        return PeerStack(
            kubectl=kubectl, cluster=cluster, node=node, certs=self._certs, seconds=seconds
        )


def gate_on(k: Kubectl, gate: str) -> None:
    """``gate`` added to the KubeVirt CR's feature gates unless there."""
    kv = json.loads(k("get", "kv", "kubevirt", "-n", "kubevirt", "-o", "json"))
    dev = kv["spec"].get("configuration", {}).get("developerConfiguration", {})
    gates = dev.get("featureGates", [])
    if gate not in gates:
        config = {"developerConfiguration": {"featureGates": [*gates, gate]}}
        body = json.dumps({"spec": {"configuration": config}})
        k("patch", "kv", "kubevirt", "-n", "kubevirt", "--type=merge", "-p", body)
