"""A real Prometheus for the local cluster: Debian's binary as a host process.

It runs beside the control plane, on loopback, marked with the cluster's id like every
other component (so ``Cluster.down`` and the stragglers' reaper end it), scrapes the pods
directly (the host routes to the nodes' pod networks) at the targets that its discovery
process (localkube/promsd.py, the "prometheus-sd" component) finds through the apiserver.
Its configuration is derived from the shipped monitoring manifests (localkube/promconfig.py);
its data, config, rule file, target file and port live in ``<state>/prometheus``.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
from pathlib import Path

import structlog
import yaml

from localkube.cluster import Cluster
from localkube.errors import ComponentFailed
from localkube.health import wait_healthy
from localkube.procs import (
    DaemonSpec,
    carries_marker,
    pid_alive,
    read_pidfile,
    spawn_detached,
    stop_process,
)
from localkube.promconfig import (
    PrometheusOptions,
    load_manifest,
    monitored_namespaces,
    prometheus_config,
    rule_file,
)

log = structlog.get_logger()
NAME = "prometheus"
SD_NAME = "prometheus-sd"


class LocalPrometheus:
    """The Prometheus of one local cluster."""

    def __init__(self, cluster: Cluster, options: PrometheusOptions | None = None) -> None:
        self.cluster = cluster
        self.options = options or PrometheusOptions()
        self.root = cluster.paths.root / NAME
        self.pidfile = cluster.paths.pidfile(NAME)
        self.log_file = cluster.paths.log(NAME)

    @property
    def port(self) -> int:
        """Its loopback port, picked once per cluster and kept in its state dir."""
        path = self.root / "port.json"
        with contextlib.suppress(OSError, ValueError, KeyError):
            return int(json.loads(path.read_text())["port"])
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        self.root.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"port": port}) + "\n")
        return port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def running(self) -> bool:
        pid = read_pidfile(self.pidfile)
        return pid is not None and carries_marker(pid, self.cluster.marker)

    @property
    def targets_file(self) -> Path:
        return self.root / "targets.json"

    def write_config(self) -> Path:
        """prometheus.yml and the rule file, from the manifests; returns the config path."""
        self.root.mkdir(parents=True, exist_ok=True)
        if not self.targets_file.exists():
            self.targets_file.write_text("[]\n")
        rules = self.root / "kubevirt-py.rules.yaml"
        rules.write_text(
            yaml.safe_dump(rule_file(load_manifest("prometheusrule.yaml"),
                                     for_cap=self.options.for_cap), sort_keys=False)
        )  # fmt: skip
        config = self.root / "prometheus.yml"
        doc = prometheus_config(
            targets_file=self.targets_file, rules_path=rules, options=self.options
        )
        config.write_text(yaml.safe_dump(doc, sort_keys=False))
        return config

    async def up(self) -> str:
        """Start it unless running (a new config applies on the next start); its URL once
        it is ready."""
        binary = shutil.which("prometheus")
        if binary is None:
            raise ComponentFailed(NAME, "no prometheus binary: install Debian's prometheus")
        if not self.running():
            config = self.write_config()
            self._start_discovery()
            spec = DaemonSpec(
                name=NAME,
                argv=(
                    binary, f"--config.file={config}",
                    f"--storage.tsdb.path={self.root / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--storage.tsdb.retention.time=1d",
                ),
                log_file=self.log_file,
                pidfile=self.pidfile,
            )  # fmt: skip
            spawn_detached(spec, marker=self.cluster.marker)
        pid = read_pidfile(self.pidfile)
        assert pid is not None
        await wait_healthy(
            NAME, f"{self.url}/-/ready", alive=lambda: pid_alive(pid), log_file=self.log_file
        )
        log.info("prometheus_ready", url=self.url, pid=pid)
        return self.url

    def _start_discovery(self) -> None:
        pidfile = self.cluster.paths.pidfile(SD_NAME)
        pid = read_pidfile(pidfile)
        if pid is not None and carries_marker(pid, self.cluster.marker):
            return
        namespaces = monitored_namespaces(load_manifest("servicemonitor.yaml"))
        spec = DaemonSpec(
            name=SD_NAME,
            argv=(
                str(self.cluster.config.python), "-m", "localkube.promsd",
                f"--state-dir={self.cluster.paths.root}", f"--out={self.targets_file}",
                *(f"--namespace={ns}" for ns in namespaces),
            ),
            log_file=self.cluster.paths.log(SD_NAME),
            pidfile=pidfile,
            env={"PYTHONPATH": str(self.cluster.config.repo)},
        )  # fmt: skip
        spawn_detached(spec, marker=self.cluster.marker)

    async def down(self) -> None:
        """Stop it and its discovery (its data stays until the cluster is purged)."""
        for name in (NAME, SD_NAME):
            pidfile = self.cluster.paths.pidfile(name)
            pid = read_pidfile(pidfile)
            if pid is not None:
                await stop_process(pid, marker=self.cluster.marker, grace=10)
                log.info("component_stopped", component=name, pid=pid)
            with contextlib.suppress(FileNotFoundError):
                pidfile.unlink()
