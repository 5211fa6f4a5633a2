"""scripts/podman_wait_proxy.py answers ``wait?condition=removed`` with the container's real exit code, once it is
removed, and passes everything else through; scripts/container.sh puts it in front of podman only before 4.6.

Podman < 4.6 answers that call (``docker compose run --rm``) with 0 whatever the exit code (containers/podman#18889):
here a fake podman does exactly that, so a proxy that passed the call through would fail these tests. The real
podman is exercised by ``bash scripts/container.sh check`` (docs/CONTAINER.md).
"""

from __future__ import annotations

import http.client
import http.server
import importlib.util
import json
import os
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import REPO

PROXY = REPO / "scripts" / "podman_wait_proxy.py"
_spec = importlib.util.spec_from_file_location("podman_wait_proxy", PROXY)
proxy_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(proxy_module)


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class FakePodman:
    """Podman 4.3's compat API as far as the proxy meets it: ``removed`` answers 0 (the bug), ``next-exit`` the
    exit code (``code``); ``GET .../json`` finds the container ``removal_polls`` times, then 404."""

    def __init__(self, path: Path, code: int, removal_polls: int = 3):
        self.calls: list[str] = []
        self.code, self.removal_polls, self.json_calls = code, removal_polls, 0
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status: int, doc: dict) -> None:
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                fake.calls.append(f"GET {self.path}")
                if self.path.endswith("/containers/abc/json"):
                    fake.json_calls += 1
                    if fake.json_calls > fake.removal_polls:
                        self._send(404, {"message": "no such container"})
                    else:
                        self._send(200, {"Id": "abc"})
                else:
                    self._send(200, {"Version": "4.3.1"})

            def do_POST(self):
                fake.calls.append(f"POST {self.path}")
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if "/containers/nope/" in self.path:
                    self._send(404, {"message": "no container with name or ID \"nope\" found: no such container"})
                elif self.path.endswith("condition=removed"):
                    self._send(200, {"StatusCode": 0, "Error": None})
                else:
                    self._send(200, {"StatusCode": fake.code, "Error": None})

        self.server = _UnixServer(str(path), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def sockets(tmp_path):
    # Unix socket paths are limited to ~107 bytes: pytest's tmp_path can be longer.
    short = Path(f"/tmp/nsa-wait-proxy-{os.getpid()}-{time.monotonic_ns()}")
    short.mkdir()
    upstream, listen = short / "podman.sock", short / "docker.sock"
    podman = FakePodman(upstream, code=3)
    proc = subprocess.Popen([sys.executable, str(PROXY), "--listen", str(listen), "--upstream", str(upstream)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    for _ in range(100):
        if listen.exists():
            break
        time.sleep(0.05)
    yield podman, listen
    proc.terminate()
    proc.wait(timeout=10)
    podman.server.shutdown()
    podman.server.server_close()
    for p in short.iterdir():
        p.unlink()
    short.rmdir()


def _connect(path: Path) -> http.client.HTTPConnection:
    return proxy_module._UnixHTTPConnection(str(path), timeout=30)


def test_removed_wait_answers_the_exit_code_after_removal_and_other_calls_pass_through(sockets):
    podman, listen = sockets
    conn = _connect(listen)
    conn.request("GET", "/v1.41/version")  # passed through; the wait then comes on the same kept-alive connection
    resp = conn.getresponse()
    assert (resp.status, json.loads(resp.read())) == (200, {"Version": "4.3.1"})
    conn.request("POST", "/v1.41/containers/abc/wait?condition=removed", headers={"Content-Length": "0"})
    resp = conn.getresponse()
    assert resp.status == 200
    assert json.loads(resp.read()) == {"StatusCode": 3, "Error": None}
    assert "POST /v1.41/containers/abc/wait?condition=next-exit" in podman.calls
    assert not any(c.endswith("condition=removed") for c in podman.calls)  # podman's wrong answer never asked
    assert podman.json_calls == podman.removal_polls + 1  # answered only once the container was gone
    conn.close()


def test_other_wait_conditions_pass_through_untouched(sockets):
    podman, listen = sockets
    conn = _connect(listen)
    conn.request("POST", "/v1.41/containers/abc/wait?condition=next-exit", headers={"Content-Length": "0"})
    assert json.loads(conn.getresponse().read()) == {"StatusCode": 3, "Error": None}
    assert podman.calls == ["POST /v1.41/containers/abc/wait?condition=next-exit"]
    conn.close()


def test_removed_wait_on_a_missing_container_answers_its_error(sockets):
    _podman, listen = sockets
    conn = _connect(listen)
    conn.request("POST", "/containers/nope/wait?condition=removed", headers={"Content-Length": "0"})
    doc = json.loads(conn.getresponse().read())
    assert doc["StatusCode"] == -1 and "no such container" in doc["Error"]["Message"]
    conn.close()


def test_removed_wait_is_recognised_only_as_docker_sends_it():
    assert proxy_module.removed_wait("/v1.41/containers/abc/wait?condition=removed", "POST") == ("/v1.41", "abc")
    assert proxy_module.removed_wait("/containers/abc/wait?condition=removed", "POST") == ("", "abc")
    assert proxy_module.removed_wait("/containers/abc/wait?condition=next-exit", "POST") is None
    assert proxy_module.removed_wait("/containers/abc/wait?condition=removed", "GET") is None
    assert proxy_module.removed_wait("/libpod/containers/abc/wait?condition=removed", "POST") is None


@pytest.mark.parametrize(("version", "needed"), [("4.3.1", True), ("4.5.9", True), ("4.6.0", False),
                                                 ("4.10.0", False), ("5.4.2", False)])
def test_container_sh_starts_the_proxy_only_before_podman_4_6(tmp_path, version, needed):
    fake = tmp_path / "podman"
    fake.write_text(f"#!/bin/sh\necho 'podman version {version}'\n")
    fake.chmod(0o755)
    script = (REPO / "scripts" / "container.sh").read_text()
    start = script.index("wait_proxy_needed() {")
    function = script[start:script.index("\n}\n", start) + 3]
    proc = subprocess.run(["bash", "-c", function + "wait_proxy_needed"], capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert (proc.returncode == 0) is needed, proc.stderr
    assert 'if wait_proxy_needed; then DOCKER_HOST="unix://$state/docker.sock"; fi' in script
    assert 'scripts/podman_wait_proxy.py" --listen "$state/docker.sock" --upstream "$state/podman.sock"' in script

