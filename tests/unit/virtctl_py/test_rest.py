"""virtctl_py.rest: the quick verbs' synchronous client, with the full client's errors; and
the quick verbs' promise: no asyncio, aiohttp or model import on their path."""

from __future__ import annotations

import http.server
import json
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from shared.actions import ACTIONS, Action
from shared.kube.api_types import PatchType
from shared.kube.connection import Connection
from shared.kube.errors import ConfigError, Forbidden, NotFound, TransportError
from shared.kube.resources import VMIMS
from tests.unit.importcheck import loaded_by
from virtctl_py import commands
from virtctl_py.rest import MERGE_PATCH, Rest


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers /prefix/version, refuses /prefix/secret (403), 404 elsewhere; records each
    request (method, path, headers, body) and the client's port (one per connection)."""

    protocol_version = "HTTP/1.1"  # keep-alive, as kube-apiserver
    seen: ClassVar[list[tuple[str, str, Any, bytes, int]]] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.seen.append((self.command, self.path, self.headers, body, self.client_address[1]))
        out: dict[str, Any]
        if self.path == "/prefix/version":
            status, out = 200, {"gitVersion": "v1"}
        elif self.path == "/prefix/secret":
            status, out = 403, {"kind": "Status", "reason": "Forbidden", "message": "no, alice"}
        elif self.path.startswith("/prefix/apis/kubevirt.io/v1/namespaces/ns/"):
            status, out = 200, {"kind": "List", "items": [{"metadata": {"name": "m"}}]}
        else:
            status, out = 404, {"kind": "Status", "reason": "NotFound", "message": "nope"}
        raw = json.dumps(out).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    do_GET = do_PUT = do_DELETE = do_POST = do_PATCH = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    """A keep-alive HTTP server on loopback; its base URL with a path prefix."""
    Recorder.seen = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/prefix"
    httpd.shutdown()
    httpd.server_close()


def rest(conn: Connection, headers: tuple[tuple[str, str], ...] = ()) -> Rest:
    return Rest(lambda: conn, timeout=5, headers=headers)


def test_requests_send_credentials_bodies_and_map_errors(server: str) -> None:
    """The JSON answer under the server's path prefix, with the bearer token, repeated
    headers and a JSON body (a patch with its content type); a 403 is Forbidden and a 404
    NotFound (the API's message kept); every request of the command rides one connection."""
    headers = (("Impersonate-Group", "g1"), ("Impersonate-Group", "g2"))
    with rest(Connection(host=server, token="t0k"), headers) as api:
        api.connect()  # opened ahead of the first request, then reused
        assert api.request("GET", "/version") == {"gitVersion": "v1"}
        with pytest.raises(Forbidden, match="no, alice"):
            api.request("GET", "/secret")
        with pytest.raises(NotFound, match="nope"):
            api.request("PUT", "/missing", body={"dryRun": ["All"]})
        assert api.list(VMIMS, namespace="ns") == [{"metadata": {"name": "m"}}]
        api.patch(VMIMS, "m", [{"op": "remove", "path": "/x"}], namespace="ns",
                  patch_type=PatchType.JSON)  # fmt: skip
        api.create(VMIMS, {"metadata": {"name": "n", "namespace": "ns"}})
        api.update(VMIMS, {"metadata": {"name": "n", "namespace": "ns"}})
        api.delete(VMIMS, "m", namespace="ns")
    prefix = "/prefix/apis/kubevirt.io/v1/namespaces/ns"
    (_, _, first, _, port), *_, (method, path, _, deleted, last_port) = Recorder.seen
    assert first["Authorization"] == "Bearer t0k"
    assert first.get_all("Impersonate-Group") == ["g1", "g2"]
    _, _, put_headers, put_body, _ = Recorder.seen[2]
    assert json.loads(put_body) == {"dryRun": ["All"]}
    assert put_headers["Content-Type"] == "application/json"
    assert (method, path) == (
        "DELETE", "/prefix/apis/kubevirt.io/v1/namespaces/ns/virtualmachineinstancemigrations/m"
    )  # fmt: skip
    assert json.loads(deleted) == {"apiVersion": "v1", "kind": "DeleteOptions"}
    _, _, patch_headers, patch_body, _ = Recorder.seen[4]
    assert patch_headers["Content-Type"] == "application/json-patch+json"
    assert json.loads(patch_body) == [{"op": "remove", "path": "/x"}]
    assert Recorder.seen[5][:2] == ("POST", f"{prefix}/virtualmachineinstancemigrations")
    assert Recorder.seen[6][:2] == ("PUT", f"{prefix}/virtualmachineinstancemigrations/n")
    assert port == last_port, "one kept-alive connection for the command"


def test_a_connection_the_server_closed_is_reopened(server: str) -> None:
    """The server closing the idle connection between two requests costs a reconnect, not
    an error."""
    with rest(Connection(host=server)) as api:
        api.request("GET", "/version")
        assert api._client is not None and api._client.sock is not None
        api._client.sock.shutdown(socket.SHUT_RDWR)  # as an idle timeout would
        assert api.request("GET", "/version") == {"gitVersion": "v1"}
    assert len(Recorder.seen) == 2


def test_unreachable_server_and_proxy_are_typed_errors() -> None:
    """Nobody listening: TransportError; a proxy-url: ConfigError (not supported here)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(TransportError), rest(Connection(host=f"http://127.0.0.1:{port}")) as api:
        api.request("GET", "/version")
    proxied = Connection(host="https://127.0.0.1:1", proxy="http://127.0.0.1:2")
    with pytest.raises(ConfigError, match="proxy"), rest(proxied) as api:
        api.request("GET", "/version")


def test_cli_actions_are_the_action_tables() -> None:
    """The quick verbs' spelled-out method and path are shared.actions' rows."""
    by_path = {str(a): spec for a, spec in ACTIONS.items() if isinstance(a, Action)}
    for verb, (method, sub) in commands.CLI_ACTIONS.items():
        assert (by_path[sub].method, str(by_path[sub].action)) == (method, sub), verb


@pytest.mark.parametrize("verb", [["pause", "vmi", "x"], ["guestosinfo", "x"], ["version"]])
def test_quick_verbs_load_no_asyncio_client_or_model(verb: list[str], tmp_path: Path) -> None:
    """A quick verb, run to its request (nobody listening), imports neither asyncio,
    aiohttp, kubernetes-asyncio nor the model: what keeps it near the interpreter's start."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [*verb, "--server", f"http://127.0.0.1:{port}", "--token", "t"]
    code = (
        "from virtctl_py.main import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
    )
    heavy = (
        "asyncio", "aiohttp", "shared.model", "kubernetes_asyncio", "shared.actions", "structlog",
    )  # fmt: skip
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    loaded, out = loaded_by(code, heavy, env=env)
    assert loaded == [], out
    assert "cannot reach the cluster" in out or "unavailable" in out


def test_default_patch_is_kubeclients() -> None:
    """The default patch type is shared.kube's merge patch (spelled out, not imported)."""
    assert MERGE_PATCH == PatchType.MERGE
