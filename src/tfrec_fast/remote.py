"""Remote data: TFRecord files in object stores and over HTTP, through fsspec (extra ``remote``).

A path that is a URL (``s3://``, ``gs://``, ``az://``, ``https://``, ``memory://``, any fsspec
protocol or chained URL) or any path given with ``filesystem=`` (an fsspec filesystem or a
``pyarrow.fs.FileSystem``) becomes a :class:`RemotePath`. ``file://`` URLs are local paths.

- Sequential reads (:class:`ReadAheadFile`) fetch large blocks on worker threads, several ahead
  of the reader, so network waits overlap with inflating, checksumming and parsing; the C++
  reader pulls from it through ``readinto``. The object's size is known up front, so a short
  answer is an error to retry, never the end of the file.
- Random access (:func:`read_records_at`) coalesces nearby records into range requests sent
  concurrently (fsspec ``cat_ranges``), and the C++ layer checks the fetched records as it checks
  local ones.
- Every request is retried a bounded number of times (:data:`RETRIES`), then fails with an
  ``OSError`` naming the URL and the byte offset. Messages never show credentials: user info and
  query strings of URLs are masked.
- Filesystems are made again in each new process (after a fork, or unpickled in a spawned
  one): async filesystems such as s3fs own an event loop and connections a child must not share.
"""

from __future__ import annotations

import collections
import concurrent.futures
import errno
import glob as _glob
import io
import os
import pickle
import posixpath
import re
import sys
import time
import urllib.parse
import urllib.request
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = ["RemotePath", "ReadAheadFile", "is_url", "resolve", "expand", "open_input",
           "read_records_at", "coalesce", "redact", "MIN_BLOCK_SIZE", "MAX_BLOCK_SIZE",
           "DEFAULT_READ_AHEAD", "DEFAULT_CONCURRENCY", "MAX_GAP", "MAX_RANGE",
           "WRITE_BLOCK_SIZE", "RETRIES", "RETRY_DELAY"]

# Sequential reads: range requests of a quarter of the object, between these sizes, this many in
# flight ahead of the reader (so up to (1 + DEFAULT_READ_AHEAD) * MAX_BLOCK_SIZE bytes held). A
# request costs a round trip (~10-100 ms on a cloud store) and some servers (moto) copy the
# whole object for each, so blocks are large; two in flight overlap the round trips and exceed
# what one connection carries.
MIN_BLOCK_SIZE = 8 << 20
MAX_BLOCK_SIZE = 32 << 20
DEFAULT_READ_AHEAD = 2
# Random access: range requests in flight at once, and how records are coalesced into them.
DEFAULT_CONCURRENCY = 64
MAX_GAP = 256 << 10
MAX_RANGE = 16 << 20
# Writes: the part size of multipart uploads (S3's minimum is 5 MiB).
WRITE_BLOCK_SIZE = 16 << 20
# A failed or short request is tried this many more times, waiting RETRY_DELAY, then twice
# that, and so on.
RETRIES = 3
RETRY_DELAY = 0.25

_EXTRA = "pip install 'tfrec_fast[remote]'"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+(://|::)")
# Errors no retry can mend.
_FINAL = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError,
          FileExistsError, ImportError, TypeError, ValueError, NotImplementedError)


def is_url(path) -> bool:
    """True for ``scheme://...`` and fsspec chained URLs (``simplecache::s3://...``)."""
    return isinstance(path, str) and _SCHEME.match(path) is not None


# ---- messages without credentials --------------------------------------------------------------

_USERINFO = re.compile(r"(?<=://)[^/@\s'\"]+@")
_QUERY = re.compile(r"(://[^\s'\"?#]*)\?[^\s'\"#]*")


def redact(text: str) -> str:
    """``text`` with the user info (``user:password@``) and query strings (signatures, tokens)
    of any URL in it masked."""
    return _QUERY.sub(r"\1?***", _USERINFO.sub("***@", text))


def _cause(error: BaseException) -> str:
    text = redact(str(error)) or "no detail"
    if len(text) > 300:
        text = text[:300] + "..."
    return f"{type(error).__name__}: {text}"


# ---- filesystems -------------------------------------------------------------------------------

def _fsspec():
    try:
        import fsspec
    except ImportError:
        raise ImportError(f"reading or writing URLs needs fsspec: {_EXTRA} (and the package of "
                          "the protocol: s3fs for s3://, gcsfs for gs://, adlfs for az://)"
                          ) from None
    return fsspec


def _as_fsspec(filesystem):
    """An fsspec filesystem, or a pyarrow.fs.FileSystem wrapped as one."""
    fsspec = _fsspec()
    if isinstance(filesystem, fsspec.AbstractFileSystem):
        return filesystem
    if type(filesystem).__module__.startswith("pyarrow"):
        import pyarrow.fs
        if isinstance(filesystem, pyarrow.fs.FileSystem):
            from fsspec.implementations.arrow import ArrowFSWrapper
            return ArrowFSWrapper(filesystem)
    raise TypeError("filesystem must be an fsspec filesystem or a pyarrow.fs.FileSystem, not "
                    f"{type(filesystem).__name__}")


class _FileSystem:
    """An fsspec filesystem that each process makes for itself (from its pickle, which fsspec
    filesystems and pyarrow's support): what a parent made must not be used in a forked child,
    nor finalised there (see _hold_for_child)."""

    def __init__(self, fs):
        self._fs = fs
        self._pid = os.getpid()

    def get(self):
        if self._pid != os.getpid():
            _inherited.append(self._fs)
            self._fs = pickle.loads(pickle.dumps(self._fs))
            self._pid = os.getpid()
        return self._fs

    def __getstate__(self):
        return {"fs": self._fs}

    def __setstate__(self, state):
        self._fs = state["fs"]
        self._pid = os.getpid()


# A forked child shares the kernel object behind the parent's event loop (epoll). fsspec drops its
# instance cache in a new process; if the child then finalised the parent's filesystems or loop,
# closing their connections and self-pipe would unregister them from that shared epoll, and the
# parent's requests on those connections would hang. So a child keeps what it inherited, unused.
_inherited: list = []
_held: Optional[list] = None


def _hold_for_child() -> None:
    global _held
    asyn = sys.modules.get("fsspec.asyn")
    if asyn is None:
        return
    held = [asyn.loop[0], asyn.iothread[0]]
    classes = [sys.modules["fsspec.spec"].AbstractFileSystem]
    while classes:
        cls = classes.pop()
        classes.extend(cls.__subclasses__())
        held.extend(vars(cls).get("_cache", {}).values())
    _held = held


def _release_in_parent() -> None:
    global _held
    _held = None


def _keep_in_child() -> None:
    if _held is not None:
        _inherited.append(_held)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_hold_for_child, after_in_parent=_release_in_parent,
                        after_in_child=_keep_in_child)


def _with_defaults(protocol: str, options: Mapping[str, Any]) -> dict:
    """storage_options plus what random access needs: s3fs's connection pool is 10 by default,
    which would serialise a batch's concurrent range requests."""
    options = dict(options)
    if protocol in ("s3", "s3a"):
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("max_pool_connections", DEFAULT_CONCURRENCY)
        options["config_kwargs"] = config
    return options


def _local_path(url: str) -> Optional[str]:
    """The local path of a ``file://`` URL (None for other URLs)."""
    if not url.lower().startswith("file://"):
        return None
    parts = urllib.parse.urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        return None
    return urllib.request.url2pathname(parts.path)


class RemotePath:
    """A file on an fsspec filesystem: ``url`` as given (or found by a glob), ``name`` the same
    with credentials masked (for messages), ``path`` what the filesystem calls it."""

    __slots__ = ("_fs", "path", "url", "name")

    def __init__(self, fs: _FileSystem, path: str, url: str):
        self._fs = fs
        self.path = path
        self.url = url
        self.name = redact(url)

    @property
    def fs(self):
        return self._fs.get()

    def __repr__(self) -> str:
        return f"RemotePath({self.name!r})"

    def __str__(self) -> str:
        return self.name

    def __eq__(self, other) -> bool:
        return (isinstance(other, RemotePath) and type(self.fs) is type(other.fs) and
                self.path == other.path)

    def __hash__(self) -> int:
        return hash(self.path)

    def __getstate__(self):
        return {"fs": self._fs, "path": self.path, "url": self.url}

    def __setstate__(self, state):
        self.__init__(state["fs"], state["path"], state["url"])

    # -- naming --

    def sibling(self, path: str) -> "RemotePath":
        """Another file of the same filesystem, by its filesystem path."""
        return RemotePath(self._fs, path, self._url_of(path))

    def _url_of(self, path: str) -> str:
        if not is_url(self.url):
            return path  # named as the user names them with filesystem=
        return self.fs.unstrip_protocol(path)

    def join(self, name: str) -> "RemotePath":
        return self.sibling(posixpath.join(self.path, name))

    @property
    def parent(self) -> "RemotePath":
        return self.sibling(self.fs._parent(self.path))

    @property
    def basename(self) -> str:
        return posixpath.basename(self.path.rstrip("/"))

    # -- metadata --

    def info(self) -> dict:
        """The object's metadata, asked afresh (not from a listing cached earlier)."""
        fs = self.fs
        fs.invalidate_cache(self.path)
        return _retrying(lambda: fs.info(self.path), "looking up", self.name, 0)

    def size(self) -> int:
        info = self.info()
        if info.get("type") == "directory":
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), self.name)
        if info.get("size") is None:
            raise OSError(errno.EIO, "the server does not tell the size", self.name)
        return int(info["size"])

    def exists(self) -> bool:
        fs = self.fs
        fs.invalidate_cache(self.path)
        return bool(_retrying(lambda: fs.exists(self.path), "looking up", self.name, 0))

    def listdir(self) -> List[str]:
        """Names of the entries of a directory (none if it does not exist)."""
        fs = self.fs
        fs.invalidate_cache(self.path)
        try:
            entries = _retrying(lambda: fs.ls(self.path, detail=False), "listing", self.name, 0)
        except FileNotFoundError:
            return []
        return sorted(posixpath.basename(e.rstrip("/")) for e in entries)

    # -- reading --

    def read(self, start: Optional[int] = None, end: Optional[int] = None) -> bytes:
        """Bytes [start, end) (from byte 0 / to the end of the object by default), retried as
        needed; a short answer is retried, and the error after the last attempt names the URL
        and the offset."""
        fs = self.fs
        if start is None and end is None:
            return _retrying(lambda: fs.cat_file(self.path), "reading", self.name, 0)
        start = 0 if start is None else start
        end = self.size() if end is None else end
        want = end - start
        if want <= 0:
            return b""

        def fetch():
            data = _cat(fs, self.path, start, end)
            if len(data) != want:
                raise _ShortRead(f"asked for {want} bytes, got {len(data)}")
            return data
        return _retrying(fetch, "reading", self.name, start)

    def read_ranges(self, starts: Sequence[int], ends: Sequence[int]) -> List[bytes]:
        """Bytes [starts[k], ends[k]) for each k, requested concurrently (at most
        DEFAULT_CONCURRENCY at a time), each retried as :meth:`read` is."""
        fs = self.fs
        out: List[Optional[bytes]] = [None] * len(starts)
        todo = list(range(len(starts)))
        delay = RETRY_DELAY
        for attempt in range(RETRIES + 1):
            got = _cat_ranges(fs, self.path, [starts[k] for k in todo], [ends[k] for k in todo])
            failed = []
            for k, data in zip(todo, got):
                if isinstance(data, BaseException):
                    if not _retryable(data):
                        raise _final_error(data, self.name) from None
                    failed.append((k, data))
                elif len(data) != ends[k] - starts[k]:
                    failed.append((k, _ShortRead(f"asked for {ends[k] - starts[k]} bytes, "
                                                 f"got {len(data)}")))
                else:
                    out[k] = data
            if not failed:
                return out  # type: ignore[return-value]
            todo = [k for k, _ in failed]
            if attempt < RETRIES:
                time.sleep(delay)
                delay *= 2
        k, error = failed[0]
        raise _gave_up("reading", self.name, starts[k], error)

    # -- writing --

    def open_output(self):
        """A binary file that streams to the object (multipart uploads where the filesystem
        does them); the object appears whole when it is closed."""
        fs = self.fs
        try:
            return fs.open(self.path, "wb", block_size=WRITE_BLOCK_SIZE)
        except _FINAL as error:
            raise _final_error(error, self.name) from None

    def write_bytes(self, data: bytes) -> None:
        """Puts a whole small object in one request (atomic on object stores)."""
        fs = self.fs
        _retrying(lambda: fs.pipe_file(self.path, data), "writing", self.name, 0)

    def rename(self, target: "RemotePath") -> None:
        """Moves the object (a server-side copy and delete on object stores)."""
        fs = self.fs
        _retrying(lambda: fs.mv(self.path, target.path), "renaming", self.name, 0)

    def remove(self) -> None:
        fs = self.fs
        _retrying(lambda: fs.rm_file(self.path), "removing", self.name, 0)

    def makedirs(self) -> None:
        fs = self.fs
        _retrying(lambda: fs.makedirs(self.path, exist_ok=True), "creating", self.name, 0)


def _cat(fs, path: str, start: int, end: int) -> bytes:
    """fs.cat_file(path, start, end); pyarrow's, through fsspec's wrapper, as a seekable file
    (the wrapper opens a stream for start=0, which cannot tell() where it is)."""
    if type(fs).__name__ == "ArrowFSWrapper":
        return fs.cat_file(path, start=start, end=end, seekable=True)
    return fs.cat_file(path, start=start, end=end)


def _cat_ranges(fs, path: str, starts: List[int], ends: List[int]) -> list:
    """fsspec cat_ranges (concurrent on async filesystems), exceptions returned in place; a pool
    of threads for the others (pyarrow's, which block)."""
    from fsspec.asyn import AsyncFileSystem

    if isinstance(fs, AsyncFileSystem):
        return fs.cat_ranges([path] * len(starts), starts, ends, on_error="return",
                             batch_size=DEFAULT_CONCURRENCY)

    def one(k):
        try:
            return _cat(fs, path, starts[k], ends[k])
        except Exception as error:  # returned, as cat_ranges does
            return error
    if len(starts) == 1:
        return [one(0)]
    with concurrent.futures.ThreadPoolExecutor(min(len(starts), DEFAULT_CONCURRENCY)) as pool:
        return list(pool.map(one, range(len(starts))))


# ---- retries and errors ------------------------------------------------------------------------

class _ShortRead(OSError):
    """The server sent fewer (or more) bytes than asked for: retried, never taken for the end."""


def _retryable(error: BaseException) -> bool:
    if isinstance(error, _FINAL):
        return False
    status = getattr(error, "status", None)  # aiohttp's ClientResponseError (HTTP)
    return not (isinstance(status, int) and 400 <= status < 500 and status not in (408, 429))


def _final_error(error: BaseException, name: str) -> BaseException:
    """The error for ``name``, without the filesystem's own wording of the path."""
    for kind, code in ((FileNotFoundError, errno.ENOENT), (IsADirectoryError, errno.EISDIR),
                       (NotADirectoryError, errno.ENOTDIR), (PermissionError, errno.EACCES),
                       (FileExistsError, errno.EEXIST)):
        if isinstance(error, kind):
            return kind(code, os.strerror(code), name)
    if isinstance(error, (ImportError, TypeError, ValueError, NotImplementedError)):
        return error
    return OSError(errno.EIO, _cause(error), name)


def _gave_up(what: str, name: str, offset: int, error: BaseException) -> OSError:
    return OSError(errno.EIO, f"{what} failed at byte offset {offset} after {RETRIES + 1} "
                              f"attempts ({_cause(error)})", name)


def _retrying(call, what: str, name: str, offset: int):
    """call(), tried again after errors a retry may mend; then OSError naming ``name`` and
    ``offset``. The cause is summarised (credentials masked), not chained."""
    delay = RETRY_DELAY
    for attempt in range(RETRIES + 1):
        try:
            return call()
        except Exception as error:
            if not _retryable(error):
                raise _final_error(error, name) from None
            last = error
        if attempt < RETRIES:
            time.sleep(delay)
            delay *= 2
    raise _gave_up(what, name, offset, last) from None


# ---- resolving paths ---------------------------------------------------------------------------

def resolve(path, storage_options: Optional[Mapping[str, Any]] = None,
            filesystem=None) -> Union[str, RemotePath]:
    """A local path (str) or a :class:`RemotePath`.

    With ``filesystem`` every path is on it (URLs too: their scheme is dropped). Otherwise a URL
    goes to fsspec with ``storage_options``, and anything else is local (``file://`` URLs
    included); ``storage_options`` for a local path is an error, as in pandas.
    """
    if isinstance(path, RemotePath):
        return path
    text = os.fsdecode(os.fspath(path))
    if filesystem is not None:
        if storage_options:
            raise ValueError("give storage_options or filesystem, not both: the filesystem "
                             "was made with its options")
        fs = _as_fsspec(filesystem)
        return RemotePath(_FileSystem(fs), _fs_path(fs, text), text)
    local = _local_path(text) if is_url(text) else text
    if local is not None:
        if storage_options:
            raise ValueError(f"storage_options are for URLs (s3://, gs://, https://, ...), "
                             f"not the local path {text!r}")
        return local
    fsspec = _fsspec()
    protocol = fsspec.core.split_protocol(text.split("::")[-1])[0] or ""
    try:
        fs, fs_path = fsspec.core.url_to_fs(text, **_with_defaults(protocol,
                                                                    storage_options or {}))
    except ImportError as error:  # fsspec's words name the package ("Install s3fs to ...")
        raise ImportError(f"{redact(text)}: {error}") from None
    return RemotePath(_FileSystem(fs), fs_path, text)


def _fs_path(fs, text: str) -> str:
    """What ``fs`` calls the path or URL ``text``."""
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    if is_url(text) and not any(p.startswith("http") for p in protocols):
        text = text.split("://", 1)[1]
    return fs._strip_protocol(text)


def _has_magic(rp: RemotePath) -> bool:
    path = rp.path
    if rp.url.lower().startswith(("http://", "https://")):
        path = urllib.parse.urlsplit(path).path  # "?" starts a query, not a wildcard
    return _glob.has_magic(path)


def expand(path, storage_options=None, filesystem=None) -> List[RemotePath]:
    """A remote path or glob pattern -> the files it names: itself when it has no wildcard or
    exists, else the files matching (sorted; a wildcard matches no leading "." of a name, as
    the local glob; directories left out). No match is FileNotFoundError naming the pattern."""
    rp = resolve(path, storage_options, filesystem)
    if not isinstance(rp, RemotePath):
        raise ValueError(f"{path!r} is a local path: expand() is for remote paths (URLs, or "
                         "paths on a filesystem)")
    if not _has_magic(rp) or rp.exists():
        return [rp]
    fs = rp.fs
    found = _retrying(lambda: fs.glob(rp.path, detail=True), "listing", rp.name, 0)
    hidden_ok = posixpath.basename(rp.path).startswith(".")
    names = sorted(name for name, info in found.items()
                   if info.get("type") != "directory" and
                   (hidden_ok or not posixpath.basename(name).startswith(".")))
    if not names:
        raise FileNotFoundError(errno.ENOENT, "no file matches this pattern", rp.name)
    return [rp.sibling(name) for name in names]


# ---- sequential reads --------------------------------------------------------------------------

def open_input(rp: RemotePath, *, block_size: Optional[int] = None,
               read_ahead: Optional[int] = None):
    """A binary file reading ``rp`` from the start (see :class:`ReadAheadFile`); a server that
    does not tell the size gets fsspec's streaming file instead."""
    info = rp.info()
    if info.get("type") == "directory":
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), rp.name)
    if info.get("size") is None:
        return rp.fs.open(rp.path, "rb", block_size=block_size or MIN_BLOCK_SIZE)
    return ReadAheadFile(rp, int(info["size"]), block_size=block_size, read_ahead=read_ahead)


class ReadAheadFile(io.RawIOBase):
    """A remote object of known size, read front to back: blocks of ``block_size`` bytes
    (default: a quarter of the object, 8 to 32 MiB) are requested ``read_ahead`` (default 2) at
    a time, ahead of the reader, on worker threads (which wait for the network without the
    GIL). ``readinto`` hands out the block in hand and waits only when
    the next one has not arrived. Seeking is allowed (the blocks then start again there).

    Not thread-safe: one reader at a time, as for any file object.
    """

    def __init__(self, rp: RemotePath, size: int, *, block_size: Optional[int] = None,
                 read_ahead: Optional[int] = None):
        super().__init__()
        self.name = rp.name
        self._rp = rp
        self._size = size
        self._block_size = int(block_size or
                               min(MAX_BLOCK_SIZE, max(MIN_BLOCK_SIZE, size // 4)))
        self._depth = max(1, int(read_ahead or DEFAULT_READ_AHEAD))
        self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._pending: collections.deque = collections.deque()  # (start, end, future), in order
        self._next = 0  # where the next block to request starts
        self._block = memoryview(b"")
        self._block_start = 0
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        if self.closed:
            raise ValueError("I/O operation on a closed file")
        if self._pos >= self._size or not len(view):
            return 0
        at = self._pos - self._block_start
        if not 0 <= at < len(self._block):
            self._next_block()
            at = self._pos - self._block_start
        n = min(len(view), len(self._block) - at)
        view[:n] = self._block[at:at + n]
        self._pos += n
        return n

    def _next_block(self) -> None:
        """Makes the block holding the position current, keeping the next ones requested."""
        while self._pending and not self._pending[0][0] <= self._pos < self._pending[0][1]:
            self._pending.popleft()[2].cancel()  # a seek went elsewhere
        if not self._pending:
            self._next = self._pos
        self._block = memoryview(b"")  # let it go before waiting for the next
        self._request()
        start, _, future = self._pending.popleft()
        self._block = memoryview(future.result())
        self._block_start = start
        self._request()

    def _request(self) -> None:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                self._depth, thread_name_prefix="tfrec-fast-read")
        while len(self._pending) < self._depth and self._next < self._size:
            start, end = self._next, min(self._next + self._block_size, self._size)
            self._pending.append((start, end, self._pool.submit(self._rp.read, start, end)))
            self._next = end

    def close(self) -> None:
        if self._pool is not None:
            for _, _, future in self._pending:
                future.cancel()
            self._pending.clear()
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self._block = memoryview(b"")
        super().close()


# ---- random access -----------------------------------------------------------------------------

def coalesce(offsets: np.ndarray, ends: np.ndarray, max_gap: int = MAX_GAP,
             max_range: int = MAX_RANGE) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Byte ranges [offsets[k], ends[k]) sorted by offset -> (range starts, range ends, the range
    of each k): neighbours at most ``max_gap`` apart share a range of at most ``max_range``
    bytes (one record may be larger alone)."""
    n = len(offsets)
    which = np.zeros(n, dtype=np.int64)
    starts: List[int] = []
    stops: List[int] = []
    for k in range(n):
        o, e = int(offsets[k]), int(ends[k])
        if starts and o - stops[-1] <= max_gap and e - starts[-1] <= max_range:
            stops[-1] = max(stops[-1], e)
        else:
            starts.append(o)
            stops.append(e)
        which[k] = len(starts) - 1
    return np.asarray(starts, np.int64), np.asarray(stops, np.int64), which


def read_records_at(rp: RemotePath, indices: np.ndarray, offsets: np.ndarray,
                    sizes: np.ndarray, size: int, verify: bool):
    """Records ``indices`` (of an index ``offsets``/``sizes``) of the object ``rp`` of ``size``
    bytes, as one RecordBatch in the order asked for: the distinct records coalesced into range
    requests (:func:`coalesce`) sent concurrently, then checked in C++ as local reads are."""
    from . import _core
    from .errors import DataLossError

    indices = np.ascontiguousarray(indices, dtype=np.int64)
    if not len(indices):
        return _core.RecordBatch.from_records([])
    # The distinct records in file order; inverse[k]: which of them request k is.
    wanted, inverse = np.unique(indices, return_inverse=True)
    order = np.argsort(offsets[wanted], kind="stable")
    rec_offsets = offsets[wanted][order]
    rec_ends = rec_offsets + sizes[wanted][order]
    beyond = np.flatnonzero(rec_ends > size)
    if len(beyond):
        i = int(wanted[order[beyond[0]]])
        raise DataLossError(
            f"record {i} at offset {int(offsets[i])}: the index says it takes {int(sizes[i])} "
            f"bytes but the file ends at {size} (the index is stale or belongs to another "
            "file: rebuild it with `tfrec-fast index`)",
            path=rp.name, record_index=i, offset=int(offsets[i]), reason="index_mismatch")
    starts, stops, which = coalesce(rec_offsets, rec_ends)
    blobs = rp.read_ranges(starts.tolist(), stops.tolist())
    # The ranges back to back in one buffer, and where each distinct record starts in it.
    bases = np.concatenate([[0], np.cumsum(stops - starts)[:-1]]).astype(np.int64)
    at_sorted = bases[which] + (rec_offsets - starts[which])
    at = np.empty_like(at_sorted)
    at[order] = at_sorted
    data = blobs[0] if len(blobs) == 1 and isinstance(blobs[0], bytes) else b"".join(blobs)
    return _core.check_fetched(data, rp.name, at[inverse.reshape(-1)], indices, offsets[indices],
                               sizes[indices], bool(verify))
