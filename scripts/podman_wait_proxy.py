"""Docker's API on a Unix socket, passed through to podman's, but for the one call podman < 4.6 gets wrong.

``docker run --rm`` and ``docker compose run --rm`` wait on ``POST /containers/{id}/wait?condition=removed``,
and podman before 4.6 answers it with exit code 0 whatever the container's (containers/podman#18889, fixed by
containers/podman#18912 in 4.6; Debian 12 ships 4.3.1): a failing command reads as a success. This proxy
answers that call itself, as Docker's engine does: the headers at once (the docker CLI waits for them before it
starts the container), then, once the container has exited *and* been removed, the body
``{"StatusCode": <its exit code>, "Error": null}``. The exit code comes from podman's own
``wait?condition=next-exit`` (which podman takes from the container's ``died`` event, so it survives the
removal). Every other request, and every response, goes through byte for byte; upgraded (attach) connections
become a plain two-way pipe.

    python3 scripts/podman_wait_proxy.py --listen /run/docker.sock --upstream /run/podman.sock

``scripts/container.sh`` starts it in front of ``podman system service`` when podman is older than 4.6
(docs/CONTAINER.md). Standard library only: it runs on the host's python3, outside any venv.
Errors: a listen path that exists is replaced; an upstream that does not answer makes each client connection
close (the client's request fails as it would against a dead daemon).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import re
import socket
import sys
import time
from urllib.parse import parse_qs, urlsplit, urlunsplit

#: ``[/v1.41]/containers/<id or name>/wait`` — the Docker API's wait endpoint, with its optional version prefix.
WAIT_PATH = re.compile(r"^(?P<prefix>/v[0-9.]+)?/containers/(?P<id>[^/]+)/wait$")
#: How long, after the container exited, the answer waits for its removal (podman removes it in its cleanup
#: process, well under a second here); past that, the exit code is answered anyway.
REMOVAL_TIMEOUT_S = 60.0
#: The removed-wait's answer starts with these, sent at once, as Docker's engine and podman send them.
WAIT_HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
#: The connections being served (the event loop holds tasks only weakly).
_TASKS: set[asyncio.Task] = set()


class _UnixHTTPConnection(http.client.HTTPConnection):
    """An HTTP/1.1 connection to a Unix socket (for the proxy's own calls to podman)."""

    def __init__(self, path: str, timeout: float | None = None):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.timeout is not None:
            self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def removed_wait(target: str, method: str) -> tuple[str, str] | None:
    """``(api prefix, container)`` when the request is ``POST .../containers/{id}/wait?condition=removed``,
    else None."""
    if method != "POST":
        return None
    parts = urlsplit(target)
    m = WAIT_PATH.match(parts.path)
    if m is None or parse_qs(parts.query).get("condition") != ["removed"]:
        return None
    return m.group("prefix") or "", m.group("id")


def exit_code_once_removed(upstream: str, prefix: str, container: str, target: str) -> tuple[int, bytes, bytes]:
    """Block until ``container`` has exited and been removed; return ``(HTTP status, content type, body)``
    of the answer to the removed-wait ``target``.

    The exit code is podman's answer to the same call with ``condition=next-exit`` (status 200 and body
    ``{"StatusCode": int, "Error": ...}``); a non-200 answer (no such container: 404) is returned as it is.
    Removal is polled with ``GET {prefix}/containers/{id}/json`` until 404 (every 0.1 s, at most
    :data:`REMOVAL_TIMEOUT_S`).
    """
    parts = urlsplit(target)
    query = {k: v for k, v in parse_qs(parts.query).items() if k != "condition"}
    query_text = "&".join(f"{k}={x}" for k, vs in query.items() for x in vs)
    next_exit = urlunsplit(("", "", parts.path, "condition=next-exit" + (f"&{query_text}" if query_text else ""), ""))
    conn = _UnixHTTPConnection(upstream)
    try:
        conn.request("POST", next_exit, headers={"Content-Length": "0"})
        resp = conn.getresponse()
        body = resp.read()
        ctype = (resp.getheader("Content-Type") or "application/json").encode()
        if resp.status != 200:
            return resp.status, ctype, body
    finally:
        conn.close()
    deadline = time.monotonic() + REMOVAL_TIMEOUT_S
    while time.monotonic() < deadline:
        conn = _UnixHTTPConnection(upstream, timeout=10)
        try:
            conn.request("GET", f"{prefix}/containers/{container}/json")
            status = conn.getresponse().status
        except OSError:  # podman slow to answer (a loaded machine): ask again
            status = None
        finally:
            conn.close()
        if status == 404:
            break
        time.sleep(0.1)
    else:  # said in the proxy's log (scripts/container.sh: $state/logs/wait-proxy.log), the answer goes out anyway
        print(f"podman_wait_proxy: {container} not removed {REMOVAL_TIMEOUT_S:.0f} s after it exited; answered its "
              f"exit code", file=sys.stderr, flush=True)
    return 200, ctype, body


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    """The request body as it came (chunked kept chunked), by Content-Length or Transfer-Encoding."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raw = bytearray()
        while True:
            size_line = await reader.readuntil(b"\r\n")
            raw += size_line
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while True:  # trailers, up to the empty line
                    line = await reader.readuntil(b"\r\n")
                    raw += line
                    if line == b"\r\n":
                        return bytes(raw)
            raw += await reader.readexactly(size + 2)
    length = int(headers.get("content-length", "0") or 0)
    return await reader.readexactly(length) if length else b""


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            writer.write_eof()


async def _serve(creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter, upstream: str) -> None:
    try:
        ureader, uwriter = await asyncio.open_unix_connection(upstream)
    except OSError:
        cwriter.close()
        return
    # Responses flow back untouched. HTTP/1.1 clients (Go's included) send a request on a connection only once
    # the previous response is read, so the proxy's own answer never interleaves with one of podman's.
    back = asyncio.create_task(_pipe(ureader, cwriter))
    _TASKS.add(back)
    back.add_done_callback(_TASKS.discard)
    try:
        while True:
            try:
                head = await creader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                break
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            method, target, version = request_line.split(" ", 2)
            headers = {}
            for line in header_lines:
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            body = await _read_body(creader, headers)
            wait = removed_wait(target, method)
            if wait is not None:
                cwriter.write(WAIT_HEADERS)
                await cwriter.drain()
                try:
                    status, _ctype, answer = await asyncio.to_thread(exit_code_once_removed, upstream, *wait, target)
                except OSError as exc:  # podman went away: say so, as an error, never as exit code 0
                    status, answer = 500, json.dumps({"message": f"podman_wait_proxy: {exc}"}).encode()
                if status != 200:  # what podman said (no such container), as Docker's body shape
                    try:
                        message = json.loads(answer).get("message", answer.decode(errors="replace"))
                    except (ValueError, AttributeError):
                        message = answer.decode(errors="replace")
                    answer = json.dumps({"StatusCode": -1, "Error": {"Message": message}}).encode() + b"\n"
                cwriter.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(answer), answer))
                await cwriter.drain()
                continue
            uwriter.write(head + body)
            await uwriter.drain()
            if "upgrade" in headers.get("connection", "").lower() or "upgrade" in headers:
                await _pipe(creader, uwriter)  # attach: raw both ways from here on; podman ends it
                await back
                break
    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
        pass
    finally:
        uwriter.close()  # the client is gone (or done): so is this connection to podman
        await back
        cwriter.close()


def _connected(creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter, upstream: str) -> None:
    task = asyncio.get_running_loop().create_task(_serve(creader, cwriter, upstream))
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)


async def _main(listen: str, upstream: str) -> None:
    if os.path.exists(listen):
        os.unlink(listen)
    server = await asyncio.start_unix_server(lambda r, w: _connected(r, w, upstream), path=listen)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True, help="Unix socket path to serve Docker's API on")
    parser.add_argument("--upstream", required=True, help="podman system service's Unix socket")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(args.listen, args.upstream))
    return 0


if __name__ == "__main__":
    sys.exit(main())
