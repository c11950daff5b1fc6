"""Real servers on 127.0.0.1 for the remote-data tests: an S3 server (moto's ThreadedMotoServer),
an HTTP server with Range, ETag and If-Match support and a fake of GCS's JSON API (what gcsfs
reads: listings, object resources with generations, media downloads with Range), all counting
requests and the body bytes they send, and injecting faults into the next body reads (GETs of a
byte range):

- "503": the server answers 503 (S3: SlowDown) without a body;
- "drop": the headers promise the whole range, half the body is sent, then the connection closes;
- "short": a consistent but short answer (Content-Length and body both half the range): only a
  client that knows the object's size can tell it from the end of the file.

The HTTP server gives each file a strong ETag that changes when the file is replaced
(``server.files[path] = data``) and a Last-Modified time, answers If-Match with 412 when the
file changed, and can add a first-byte ``latency`` (seconds) and cap each connection's
``bandwidth`` (bytes/s), as a plain object store across a network does. ``auth=(user,
password)`` makes it answer 401 without credentials and 403 with wrong ones. The S3 server
answers 403 InvalidAccessKeyId to requests signed with an access key in ``refused_keys``.

Run as a script it serves a directory in its own process, for the benchmarks:
``python tests/_servers.py DIR --latency-ms 20 --bandwidth-mb 40`` prints ``ready PORT`` and
serves until its stdin closes; ``GET /_stats`` answers {"bytes": ..., "requests": ...} and
``GET /_reset`` zeroes them.

``gate(n)`` makes range reads wait until ``n`` of them are in flight at once: a client that sent
them one after another would find the gate broken (after a timeout), so a batch that passes it
was requested concurrently. ``hold()`` makes range reads wait until ``release()``: a client that
held the GIL while waiting for the network would keep the test from calling release() (the
hold then times out and says so). No clock is read by the tests themselves.
"""

from __future__ import annotations

import base64
import collections
import email.utils
import hashlib
import html
import itertools
import json
import logging
import os
import re
import socket
import sys
import threading
import time
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
        self.bytes_sent = 0  # body bytes of every answer
        self._bytes_by_path: collections.Counter = collections.Counter()
        self.in_flight = 0  # range reads being answered now (HTTP)
        self.max_in_flight = 0  # the most at once since clear()

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
            self.bytes_sent = 0
            self._bytes_by_path.clear()
            self.max_in_flight = self.in_flight

    def _entered(self, delta: int) -> None:
        with self._lock:
            self.in_flight += delta
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _sent(self, path: str, n: int) -> None:
        with self._lock:
            self.bytes_sent += n
            self._bytes_by_path[path] += n

    def bytes_for(self, path_part: str = "") -> int:
        """Body bytes sent for paths containing ``path_part``."""
        with self._lock:
            return sum(n for p, n in self._bytes_by_path.items() if path_part in p)

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def _log(self, method: str, path: str, ranged: str) -> str:
        """Logs a request; the fault for it (range reads only), or ""."""
        fault = ""
        with self._lock:
            self.requests.append((method, path, ranged))
            start = re.match(r"bytes=(\d+)-", ranged or "")
            if (
                method == "GET"
                and start
                and self._queue
                and int(start.group(1)) >= self._queue[0][1]
            ):
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


class _Files(dict):
    """{path: bytes} that remembers, for each path, a version number and the time it was set."""

    def __init__(self):
        super().__init__()
        self.version: dict = {}
        self.mtime: dict = {}
        self._counter = itertools.count(1)

    def __setitem__(self, path: str, data: bytes) -> None:
        super().__setitem__(path, bytes(data))
        self.version[path] = next(self._counter)
        self.mtime[path] = time.time()

    def etag(self, path: str) -> str:
        return f'"v{self.version[path]}-{len(self[path])}"'


class RangeHTTPServer(_Faults):
    """Serves ``files`` ({"/dir/name": bytes}) over HTTP/1.1 with Range requests; a path ending
    in "/" lists the files under it as links (what fsspec's HTTP glob reads). See the module
    docstring for ``etag``, ``latency``, ``bandwidth`` and ``auth``."""

    def __init__(
        self,
        *,
        etag: bool = True,
        latency: float = 0.0,
        bandwidth: "float | None" = None,
        auth: "tuple | None" = None,
        port: int = 0,
    ):
        super().__init__()
        self.files = _Files()
        self.etag = etag
        self.latency = latency
        self.bandwidth = bandwidth
        self.auth = auth
        self._server = ThreadingHTTPServer(("127.0.0.1", port or free_port()), _Handler)
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
_CHUNK = 64 << 10


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def do_HEAD(self):
        self._answer(head=True)

    def do_GET(self):
        self._answer(head=False)

    def _answer(self, head: bool):
        ranged = not head and self.headers.get("Range") is not None
        owner = self.server.owner
        if ranged:
            owner._entered(1)
        try:
            self._serve(head)
        except (BrokenPipeError, ConnectionResetError):  # the client stopped reading
            self.close_connection = True
        finally:
            if ranged:
                owner._entered(-1)

    def _send(self, status: int, body: bytes, headers=(), length=None):
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        return body

    def _write(self, path: str, body: bytes) -> None:
        """The body, at most ``bandwidth`` bytes/s on this connection, counted."""
        owner = self.server.owner
        view = memoryview(body)
        started = time.perf_counter()
        for at in range(0, len(view), _CHUNK):
            piece = view[at : at + _CHUNK]
            self.wfile.write(piece)
            owner._sent(path, len(piece))
            if owner.bandwidth:
                ahead = (at + len(piece)) / owner.bandwidth - (time.perf_counter() - started)
                if ahead > 0:
                    time.sleep(ahead)

    def _refused(self, owner) -> bool:
        if owner.auth is None:
            return False
        given = self.headers.get("Authorization")
        if given is None:
            self._send(401, b"", [("WWW-Authenticate", 'Basic realm="test"')])
            return True
        wanted = "Basic " + base64.b64encode(":".join(owner.auth).encode()).decode()
        if given != wanted:
            self._send(403, b"")
            return True
        return False

    def _serve(self, head: bool):
        owner = self.server.owner
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        if path in ("/_stats", "/_reset"):
            if path == "/_reset":
                owner.clear()
            body = json.dumps({"bytes": owner.bytes_sent, "requests": len(owner.requests)})
            self.wfile.write(self._send(200, body.encode(), [("Content-Type", "text/json")]))
            return
        ranged = self.headers.get("Range")
        fault = owner._log(self.command, path, ranged)
        if owner.latency:
            time.sleep(owner.latency)
        if self._refused(owner):
            return
        if path.endswith("/"):
            names = sorted(p[len(path) :] for p in list(owner.files) if p.startswith(path))
            links = "".join(
                f'<a href="{html.escape(n)}">{html.escape(n)}</a>\n' for n in names if "/" not in n
            )
            body = self._send(200, links.encode(), [("Content-Type", "text/html")])
            if not head:
                self.wfile.write(body)
            return
        files = owner.files
        data = files.get(path)
        if data is None:
            self._send(404, b"")
            return
        etag = files.etag(path)
        if owner.etag and self.headers.get("If-Match") not in (None, "*", etag):
            self._send(412, b"")
            return
        if fault == "503":
            self._send(503, b"")
            return
        headers = [
            ("Accept-Ranges", "bytes"),
            ("Content-Type", "application/octet-stream"),
            ("Last-Modified", email.utils.formatdate(files.mtime[path], usegmt=True)),
        ]
        if owner.etag:
            headers.append(("ETag", etag))
        if head:
            self._send(200, b"", headers, length=len(data))
            return
        status, body = 200, data
        match = _RANGE.match(ranged or "")
        if match:
            start = int(match.group(1))
            end = min(int(match.group(2)) if match.group(2) else len(data) - 1, len(data) - 1)
            body = data[start : end + 1]
            headers.append(("Content-Range", f"bytes {start}-{end}/{len(data)}"))
            status = 206
        if fault == "short":
            body = body[: len(body) // 2]
        self._send(status, body, headers)
        if fault == "drop":
            self._write(path, body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self._write(path, body)


# ---- S3 (moto) -----------------------------------------------------------------------------------


class S3Server(_Faults):
    """moto's ThreadedMotoServer on a free port, its WSGI app wrapped to log and inject faults."""

    def __init__(self, refused_keys=("refused",)):
        super().__init__()
        from moto.server import ThreadedMotoServer

        self.refused_keys = set(refused_keys)
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


_SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
_REFUSED = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidAccessKeyId</Code>'
    b"<Message>The AWS Access Key Id you provided does not exist in our records."
    b"</Message></Error>"
)


class _FaultApp:
    def __init__(self, app, faults: _Faults):
        self._app = app
        self._faults = faults

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        fault = self._faults._log(environ["REQUEST_METHOD"], path, environ.get("HTTP_RANGE"))
        signed = re.search(r"Credential=([^/]+)/", environ.get("HTTP_AUTHORIZATION", ""))
        if signed and signed.group(1) in self._faults.refused_keys:
            start_response(
                "403 Forbidden",
                [("Content-Type", "application/xml"), ("Content-Length", str(len(_REFUSED)))],
            )
            return [] if environ["REQUEST_METHOD"] == "HEAD" else [_REFUSED]
        if fault == "503":
            start_response(
                "503 Slow Down",
                [("Content-Type", "application/xml"), ("Content-Length", str(len(_SLOW_DOWN)))],
            )
            return [_SLOW_DOWN]
        if not fault:
            return self._counted(path, self._app(environ, start_response))
        captured = {}

        def keep(status, headers, exc_info=None):
            captured["status"], captured["headers"] = status, headers

        body = b"".join(self._app(environ, keep))
        headers = [(k, v) for k, v in captured["headers"] if k.lower() != "content-length"]
        if fault == "short":
            body = body[: len(body) // 2]
            start_response(captured["status"], headers + [("Content-Length", str(len(body)))])
            return [body]
        start_response(captured["status"], headers + [("Content-Length", str(len(body)))])
        return _dropping(body, environ)

    def _counted(self, path, body):
        try:
            for piece in body:
                self._faults._sent(path, len(piece))
                yield piece
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()


def _dropping(body: bytes, environ):
    """Half the body, then the connection closed under the client."""
    yield body[: len(body) // 2]
    sock = environ.get("werkzeug.socket")
    if sock is not None:
        sock.shutdown(socket.SHUT_RDWR)


# ---- GCS (a fake of the JSON API, enough for gcsfs to read) --------------------------------------


class GCSServer(_Faults):
    """The read side of Google Cloud Storage's JSON API on 127.0.0.1, for gcsfs
    (``endpoint_url=server.endpoint`` or ``STORAGE_EMULATOR_HOST``, with ``token="anon"``):

    - ``GET /storage/v1/b/{bucket}``: the bucket's resource;
    - ``GET /storage/v1/b/{bucket}/o?prefix=&delimiter=&maxResults=&pageToken=&startOffset=
      &endOffset=``: a page of the listing, objects in ``items`` and the names up to the
      delimiter in ``prefixes``, in name order, ``nextPageToken`` while more follow;
    - ``GET /storage/v1/b/{bucket}/o/{object}[?generation=]``: the object's resource (size,
      generation, md5Hash, updated), 404 if it does not exist at that generation;
    - ``GET /download/storage/v1/b/{bucket}/o/{object}?alt=media[&generation=]`` (or the same
      under ``/storage/v1``): its bytes, a ``Range: bytes=a-b`` as 206, a generation gone as 404.

    Each ``put`` gives the object a new generation, as GCS does when an object is rewritten.
    Requests are logged and faults injected as for the other servers; the bytes of objects sent
    are counted under ``/{bucket}/{object}`` (``bytes_for``), JSON answers under the request
    path.
    """

    def __init__(self):
        super().__init__()
        self.objects: dict = {}  # (bucket, name) -> (data, generation, updated)
        self.buckets: set = set()
        self._generation = itertools.count(1_700_000_000_000_000)
        self._server = ThreadingHTTPServer(("127.0.0.1", free_port()), _GCSHandler)
        self._server.daemon_threads = True
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> "GCSServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def put(self, bucket: str, name: str, data: bytes) -> int:
        """Stores an object (a new generation of it); returns the generation."""
        generation = next(self._generation)
        with self._lock:
            self.buckets.add(bucket)
            self.objects[(bucket, name)] = (bytes(data), generation, time.time())
        return generation

    def delete(self, bucket: str, name: str) -> None:
        with self._lock:
            del self.objects[(bucket, name)]

    def resource(self, bucket: str, name: str) -> "dict | None":
        with self._lock:
            found = self.objects.get((bucket, name))
        if found is None:
            return None
        data, generation, updated = found
        stamp = (
            time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(updated))
            + f".{int(updated * 1000) % 1000:03d}Z"
        )
        md5 = base64.b64encode(hashlib.md5(data).digest()).decode()
        return {
            "kind": "storage#object",
            "id": f"{bucket}/{name}/{generation}",
            "name": name,
            "bucket": bucket,
            "generation": str(generation),
            "metageneration": "1",
            "contentType": "application/octet-stream",
            "size": str(len(data)),
            "md5Hash": md5,
            "etag": md5,
            "timeCreated": stamp,
            "updated": stamp,
            "storageClass": "STANDARD",
        }

    def listing(self, bucket: str, query: dict) -> dict:
        prefix = query.get("prefix", "")
        delimiter = query.get("delimiter", "")
        start, end = query.get("startOffset", ""), query.get("endOffset", "")
        with self._lock:
            names = sorted(n for b, n in self.objects if b == bucket)
        entries: dict = {}  # name -> "item" | "prefix"
        for name in names:
            if not name.startswith(prefix) or name < start or (end and name >= end):
                continue
            cut = name.find(delimiter, len(prefix)) if delimiter else -1
            if cut >= 0:
                entries.setdefault(name[: cut + len(delimiter)], "prefix")
            else:
                entries[name] = "item"
        ordered = sorted(entries)
        first = int(query.get("pageToken") or 0)
        size = int(query.get("maxResults") or 1000)
        page = ordered[first : first + size]
        out: dict = {"kind": "storage#objects"}
        items = [self.resource(bucket, n) for n in page if entries[n] == "item"]
        prefixes = [n for n in page if entries[n] == "prefix"]
        if items:
            out["items"] = [i for i in items if i is not None]
        if prefixes:
            out["prefixes"] = prefixes
        if first + size < len(ordered):
            out["nextPageToken"] = str(first + size)
        return out


_GCS_OBJECT = re.compile(r"^(?:/download)?/storage/v1/b/([^/]+)/o/(.+)$")
_GCS_LIST = re.compile(r"^/storage/v1/b/([^/]+)/o/?$")
_GCS_BUCKET = re.compile(r"^/storage/v1/b/([^/]+)/?$")


class _GCSHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):
        try:
            self._serve()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _json(self, status: int, value: dict, path: str) -> None:
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.server.owner._sent(path, len(body))

    def _error(self, status: int, message: str, path: str) -> None:
        self._json(
            status,
            {"error": {"code": status, "message": message, "errors": [{"message": message}]}},
            path,
        )

    def _serve(self):
        owner = self.server.owner
        split = urllib.parse.urlsplit(self.path)
        raw_path = split.path  # object names stay percent-encoded until matched
        query = dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True))
        ranged = self.headers.get("Range")
        fault = owner._log("GET", urllib.parse.unquote(raw_path), ranged)
        if fault == "503":
            self._error(503, "Service Unavailable (injected)", raw_path)
            return
        match = _GCS_OBJECT.match(raw_path)
        if match:
            bucket, name = match.group(1), urllib.parse.unquote(match.group(2))
            resource = owner.resource(bucket, name)
            wanted = query.get("generation")
            if resource is None or (wanted and wanted != resource["generation"]):
                self._error(404, f"No such object: {bucket}/{name}", raw_path)
            elif query.get("alt") == "media":
                self._media(bucket, name, ranged, fault)
            else:
                self._json(200, resource, raw_path)
            return
        match = _GCS_LIST.match(raw_path)
        if match:
            if match.group(1) not in owner.buckets:
                self._error(404, "The specified bucket does not exist.", raw_path)
            else:
                self._json(200, owner.listing(match.group(1), query), raw_path)
            return
        match = _GCS_BUCKET.match(raw_path)
        if match and match.group(1) in owner.buckets:
            self._json(
                200,
                {
                    "kind": "storage#bucket",
                    "id": match.group(1),
                    "name": match.group(1),
                    "location": "US",
                    "storageClass": "STANDARD",
                },
                raw_path,
            )
            return
        self._error(404, "Not Found", raw_path)

    def _media(self, bucket: str, name: str, ranged, fault: str) -> None:
        owner = self.server.owner
        with owner._lock:
            data, generation, _ = owner.objects[(bucket, name)]
        status, body = 200, data
        headers = [
            ("Content-Type", "application/octet-stream"),
            ("x-goog-generation", str(generation)),
            ("Accept-Ranges", "bytes"),
        ]
        match = _RANGE.match(ranged or "")
        if match:
            start = int(match.group(1))
            if start >= len(data) and data:
                self._error(416, "Requested range not satisfiable", f"/{bucket}/{name}")
                return
            end = min(int(match.group(2)) if match.group(2) else len(data) - 1, len(data) - 1)
            body = data[start : end + 1]
            headers.append(("Content-Range", f"bytes {start}-{end}/{len(data)}"))
            status = 206
        if fault == "short":
            body = body[: len(body) // 2]
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        sent = body[: len(body) // 2] if fault == "drop" else body
        self.wfile.write(sent)
        owner._sent(f"/{bucket}/{name}", len(sent))
        if fault == "drop":
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)


# ---- a server in its own process, for the benchmarks ---------------------------------------------


def _serve_directory(argv) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="serve a directory over HTTP (Range, ETag)")
    parser.add_argument("root")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument(
        "--bandwidth-mb", type=float, default=0.0, help="per-connection cap, MB/s (0: none)"
    )
    args = parser.parse_args(argv)
    server = RangeHTTPServer(
        latency=args.latency_ms / 1000, bandwidth=args.bandwidth_mb * 1e6 or None
    )
    for dirpath, _, names in os.walk(args.root):
        for name in names:
            full = os.path.join(dirpath, name)
            with open(full, "rb") as f:
                server.files["/" + os.path.relpath(full, args.root).replace(os.sep, "/")] = f.read()
    server.start()
    print("ready", server.base.rsplit(":", 1)[1], flush=True)
    sys.stdin.read()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_serve_directory(sys.argv[1:]))
