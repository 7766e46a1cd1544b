"""Debian's prometheus on the derived configuration, against a small HTTPS /metrics server on
loopback standing in for a virt-handler pod (its discovery file from promsd.target_groups):
the target carries the operator's labels (job = the Service, namespace, pod, service,
endpoint, container), the daemon's own `namespace` wins (honorLabels), and the rules
evaluate on it. Only loopback; the real-node suite does the same against the cluster."""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.promconfig import PrometheusOptions, load_manifest, prometheus_config, rule_file
from localkube.promsd import target_groups

METRICS = b"""# TYPE kubevirt_vmi_info gauge
kubevirt_vmi_info{namespace="ns1",name="vm1",node="node01",phase="running"} 1
# TYPE kubevirt_virt_handler_ready_status gauge
kubevirt_virt_handler_ready_status{node="node01"} 1
"""


class _Metrics(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(METRICS)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def https_target(tmp_path: Path) -> Iterator[int]:
    """A loopback HTTPS server with a self-signed certificate; its port."""
    key, crt = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(crt), "-days", "1", "-subj", "/CN=virt-handler"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    server = http.server.HTTPServer(("127.0.0.1", 0), _Metrics)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(crt), str(key))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    thread.join(timeout=10)


def _discovered(port: int) -> list[dict[str, Any]]:
    es: dict[str, Any] = {
        "metadata": {"namespace": "kubevirt", "name": "virt-handler-metrics-1",
                     "labels": {"kubernetes.io/service-name": "virt-handler-metrics"}},
        "ports": [{"name": "metrics", "port": port}],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True},
                       "targetRef": {"kind": "Pod", "name": "virt-handler-abc"}}],
    }  # fmt: skip
    service = {"metadata": {"namespace": "kubevirt", "name": "virt-handler-metrics",
                            "labels": {"kubevirt.io/metrics": "true"}}}  # fmt: skip
    unselected = {"metadata": {"namespace": "kubevirt", "name": "other"}}
    other = {**es, "metadata": {**es["metadata"], "name": "other-1",
                                "labels": {"kubernetes.io/service-name": "other"}}}  # fmt: skip
    pod = {"metadata": {"namespace": "kubevirt", "name": "virt-handler-abc"},
           "spec": {"nodeName": "node01", "containers": [
               {"name": "virt-handler", "ports": [{"containerPort": port}]}]},
           "status": {"phase": "Running"}}  # fmt: skip
    return target_groups([es, other], [service, unselected], [pod])


def _query(url: str, expr: str) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=5) as resp:
            result: list[dict[str, Any]] = json.loads(resp.read())["data"]["result"]
            return result
    except OSError:
        return []


def _until(url: str, expr: str, proc: subprocess.Popen[bytes]) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "prometheus exited"
        if found := _query(url, expr):
            return found
        time.sleep(0.5)
    raise AssertionError(f"no result for {expr} within 60 s")


def test_prometheus_scrapes_a_discovered_https_target(tmp_path: Path, https_target: int) -> None:
    """Only the selected Service's target is scraped, over HTTPS, labelled as the operator
    labels it; the daemon's own namespace label is kept; a recording rule evaluates."""
    binary = shutil.which("prometheus")
    assert binary, "prometheus missing: install Debian's prometheus package (kv_ensure_apt)"
    (tmp_path / "targets.json").write_text(json.dumps(_discovered(https_target)))
    options = PrometheusOptions(scrape_interval="1s", evaluation_interval="1s", for_cap="2s")
    rules = rule_file(load_manifest("prometheusrule.yaml"), for_cap=options.for_cap)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    config = prometheus_config(
        targets_file=tmp_path / "targets.json", rules_path=tmp_path / "rules.yaml", options=options
    )
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    argv = [binary, f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"]  # fmt: skip
    with (tmp_path / "prometheus.log").open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        (up,) = _until(url, "up == 1", proc)
        assert up["metric"] | {"__name__": "up"} == {
            "__name__": "up", "job": "virt-handler-metrics", "namespace": "kubevirt",
            "pod": "virt-handler-abc", "service": "virt-handler-metrics",
            "endpoint": "metrics", "container": "virt-handler",
            "instance": f"127.0.0.1:{https_target}",
        }  # fmt: skip
        (info,) = _until(url, "kubevirt_vmi_info", proc)
        assert info["metric"]["namespace"] == "ns1"  # honorLabels: the VMI's, not the pod's
        (phase,) = _until(url, "node:kubevirt_vmi_phase:sum", proc)
        assert phase["metric"] == {
            "__name__": "node:kubevirt_vmi_phase:sum", "node": "node01", "phase": "running",
        }  # fmt: skip
        assert _until(url, "kubevirt_virt_handler_up", proc)[0]["value"][1] == "1"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
