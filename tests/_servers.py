"""Real servers on 127.0.0.1 for the remote-data tests: an S3 server (moto's ThreadedMotoServer)
and an HTTP server with Range support, both counting requests and injecting faults into the
next body reads (GETs of a byte range):

- "503": the server answers 503 (S3: SlowDown) without a body;
- "drop": the headers promise the whole range, half the body is sent, then the connection closes;
- "short": a consistent but short answer (Content-Length and body both half the range): only a
  client that knows the object's size can tell it from the end of the file.

``gate(n)`` makes range reads wait until ``n`` of them are in flight at once: a client that sent
them one after another would find the gate broken (after a timeout), so a batch that passes it
was requested concurrently. ``hold()`` makes range reads wait until ``release()``: a client that
held the GIL while waiting for the network would keep the test from calling release() (the
hold then times out and says so). No clock is read by the tests themselves.
"""
from __future__ import annotations

import collections
import html
import logging
import re
import socket
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FAULTS = ("503", "drop", "short")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Faults:
    """Faults for the next range reads, and a log of the requests."""

    def __init__(self):
        self._lock = threading.Lock()
        self._queue: collections.deque = collections.deque()
        self.requests: list = []  # (method, path, Range header or None)
        self._gate: "threading.Barrier | None" = None
        self.gate_broken = False
        self._hold: "threading.Event | None" = None
        self.held = 0  # range reads waiting in hold()
        self.hold_timed_out = False

    def hold(self) -> None:
        self._hold = threading.Event()
        self.hold_timed_out = False

    def release(self) -> None:
        if self._hold is not None:
            self._hold.set()
            self._hold = None

    def gate(self, n: int, timeout: float = 20.0) -> None:
        """The next range reads wait until n of them are in flight (None: no gate)."""
        self._gate = threading.Barrier(n, timeout=timeout) if n else None
        self.gate_broken = False

    def inject(self, kind: str, times: int = 1, from_offset: int = 0) -> None:
        """Faults for the next ``times`` range reads starting at ``from_offset`` or later."""
        assert kind in FAULTS, kind
        with self._lock:
            self._queue.extend([(kind, from_offset)] * times)

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def _log(self, method: str, path: str, ranged: str) -> str:
        """Logs a request; the fault for it (range reads only), or ""."""
        fault = ""
        with self._lock:
            self.requests.append((method, path, ranged))
            start = re.match(r"bytes=(\d+)-", ranged or "")
            if method == "GET" and start and self._queue and \
                    int(start.group(1)) >= self._queue[0][1]:
                fault = self._queue.popleft()[0]
            gate = self._gate if method == "GET" and ranged else None
            hold = self._hold if method == "GET" and ranged else None
        if hold is not None:
            with self._lock:
                self.held += 1
            if not hold.wait(60):
                self.hold_timed_out = True
        if gate is not None:
            try:
                gate.wait()
            except threading.BrokenBarrierError:
                self.gate_broken = True
                return "503"
        return fault

    def range_reads(self, path_part: str = "") -> list:
        with self._lock:
            return [r for r in self.requests if r[0] == "GET" and r[2] and path_part in r[1]]


# ---- HTTP ----------------------------------------------------------------------------------------

class RangeHTTPServer(_Faults):
    """Serves ``files`` ({"/dir/name": bytes}) over HTTP/1.1 with Range requests; a path ending
    in "/" lists the files under it as links (what fsspec's HTTP glob reads)."""

    def __init__(self):
        super().__init__()
        self.files: dict = {}
        self._server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Handler)
        self._server.daemon_threads = True
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> "RangeHTTPServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    @property
    def base(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def url(self, path: str) -> str:
        return self.base + path


_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def do_HEAD(self):
        self._serve(head=True)

    def do_GET(self):
        self._serve(head=False)

    def _send(self, status: int, body: bytes, headers=(), length=None):
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        return body

    def _serve(self, head: bool):
        owner = self.server.owner
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        ranged = self.headers.get("Range")
        fault = owner._log(self.command, path, ranged)
        if path.endswith("/"):
            names = sorted(p[len(path):] for p in owner.files if p.startswith(path))
            links = "".join(f'<a href="{html.escape(n)}">{html.escape(n)}</a>\n'
                            for n in names if "/" not in n)
            body = self._send(200, links.encode(), [("Content-Type", "text/html")])
            if not head:
                self.wfile.write(body)
            return
        data = owner.files.get(path)
        if data is None:
            self._send(404, b"")
            return
        if fault == "503":
            self._send(503, b"")
            return
        headers = [("Accept-Ranges", "bytes"), ("Content-Type", "application/octet-stream")]
        if head:
            self._send(200, b"", headers, length=len(data))
            return
        status, body = 200, data
        match = _RANGE.match(ranged or "")
        if match:
            start = int(match.group(1))
            end = min(int(match.group(2)) if match.group(2) else len(data) - 1, len(data) - 1)
            body = data[start:end + 1]
            headers.append(("Content-Range", f"bytes {start}-{end}/{len(data)}"))
            status = 206
        if fault == "short":
            body = body[:len(body) // 2]
        self._send(status, body, headers)
        if fault == "drop":
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(body)


# ---- S3 (moto) -----------------------------------------------------------------------------------

class S3Server(_Faults):
    """moto's ThreadedMotoServer on a free port, its WSGI app wrapped to log and inject faults."""

    def __init__(self):
        super().__init__()
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
        self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)

    def start(self) -> "S3Server":
        self._moto.start()
        server = self._moto._server  # the werkzeug server: each request calls server.app
        server.app = _FaultApp(server.app, self)
        return self

    def stop(self) -> None:
        self._moto.stop()

    @property
    def endpoint(self) -> str:
        host, port = self._moto.get_host_and_port()
        return f"http://{host}:{port}"


_SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
              b'<Message>Please reduce your request rate.</Message></Error>')


class _FaultApp:
    def __init__(self, app, faults: _Faults):
        self._app = app
        self._faults = faults

    def __call__(self, environ, start_response):
        fault = self._faults._log(environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""),
                                  environ.get("HTTP_RANGE"))
        if fault == "503":
            start_response("503 Slow Down", [("Content-Type", "application/xml"),
                                             ("Content-Length", str(len(_SLOW_DOWN)))])
            return [_SLOW_DOWN]
        if not fault:
            return self._app(environ, start_response)
        captured = {}

        def keep(status, headers, exc_info=None):
            captured["status"], captured["headers"] = status, headers
        body = b"".join(self._app(environ, keep))
        headers = [(k, v) for k, v in captured["headers"] if k.lower() != "content-length"]
        if fault == "short":
            body = body[:len(body) // 2]
            start_response(captured["status"], headers + [("Content-Length", str(len(body)))])
            return [body]
        start_response(captured["status"], headers + [("Content-Length", str(len(body)))])
        return _dropping(body, environ)


def _dropping(body: bytes, environ):
    """Half the body, then the connection closed under the client."""
    yield body[:len(body) // 2]
    sock = environ.get("werkzeug.socket")
    if sock is not None:
        sock.shutdown(socket.SHUT_RDWR)
