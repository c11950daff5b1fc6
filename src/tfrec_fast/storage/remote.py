"""fsspec (and pyarrow.fs, through fsspec's wrapper) filesystems as stores.

- Reads of a range ask for the version the reader planned with: S3 by VersionId (versioned
  buckets) or If-Match on the ETag, GCS by generation, HTTP by If-Match on a strong ETag. An
  object rewritten meanwhile is refused by the store and raises ObjectChangedError; no record of
  two versions is ever mixed. Other stores are checked by size and modification time when a
  block looks damaged (see records.py).
- Ranges of async filesystems (s3fs, gcsfs, HTTP) are coroutines on fsspec's event loop, many in
  flight without a thread each; other filesystems' on a shared pool of threads.
- Retries and errors as storage/retry.py says. The filesystems this module makes for s3:// URLs
  do not retry by themselves (s3fs ``retries=1``, botocore ``total_max_attempts=1``): the
  retries here are the only ones, with the ``retries`` setting of the call.
- Filesystems are made again in each new process (after a fork, or unpickled in a spawned
  one): async filesystems such as s3fs own an event loop and connections a child must not share.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import glob as _glob
import os
import pickle
import posixpath
import sys
import threading
import time
import urllib.parse
from datetime import datetime
from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple

from .paths import Location, is_url, redact
from .retry import ShortRead, delays, final_error, gave_up, retryable
from .settings import Settings
from .stores import Stat, Store

__all__ = ["FsspecStore", "location_of_url", "location_on", "WRITE_BLOCK_SIZE"]

# Writes: the part size of multipart uploads (S3's minimum is 5 MiB).
WRITE_BLOCK_SIZE = 16 << 20
# Threads reading ranges of filesystems that block (pyarrow's, memory://, ...), per process.
_POOL_THREADS = 32

_EXTRA = "pip install 'tfrec_fast[remote]'"


def fsspec_module():
    try:
        import fsspec
    except ImportError:
        raise ImportError(
            f"reading or writing URLs needs fsspec: {_EXTRA} (and the package of "
            "the protocol: s3fs for s3://, gcsfs for gs://, adlfs for az://)"
        ) from None
    return fsspec


def as_fsspec(filesystem):
    """An fsspec filesystem, or a pyarrow.fs.FileSystem wrapped as one."""
    fsspec = fsspec_module()
    if isinstance(filesystem, fsspec.AbstractFileSystem):
        return filesystem
    if type(filesystem).__module__.startswith("pyarrow"):
        import pyarrow.fs

        if isinstance(filesystem, pyarrow.fs.FileSystem):
            from fsspec.implementations.arrow import ArrowFSWrapper

            return ArrowFSWrapper(filesystem)
    raise TypeError(
        "filesystem must be an fsspec filesystem or a pyarrow.fs.FileSystem, not "
        f"{type(filesystem).__name__}"
    )


def _backend(fs) -> str:
    """What kind of filesystem: how to pin a read, and whether it retries by itself."""
    if hasattr(fs, "_call_s3"):
        return "s3"
    name = type(fs).__name__
    if name == "GCSFileSystem":
        return "gcs"
    if name == "HTTPFileSystem":
        return "http"
    if name == "ArrowFSWrapper":
        return "arrow"
    return "other"


def _tune(fs) -> None:
    """A filesystem made here for s3:// leaves retrying to us (its botocore config says so)."""
    if _backend(fs) == "s3":
        fs.retries = 1


class _FileSystem:
    """An fsspec filesystem that each process makes for itself (from its pickle, which fsspec
    filesystems and pyarrow's support): what a parent made must not be used in a forked child,
    nor finalised there (see _hold_for_child). ``own``: made here, so tuned (see _tune)."""

    def __init__(self, fs, own: bool):
        self._fs = fs
        self._own = own
        self._pid = os.getpid()

    def get(self):
        if self._pid != os.getpid():
            _inherited.append(self._fs)
            self._fs = pickle.loads(pickle.dumps(self._fs))
            if self._own:
                _tune(self._fs)
            self._pid = os.getpid()
        return self._fs

    def __getstate__(self):
        return {"fs": self._fs, "own": self._own}

    def __setstate__(self, state):
        self._fs = state["fs"]
        self._own = state["own"]
        self._pid = os.getpid()
        if self._own:
            _tune(self._fs)


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
    global _pool, _pool_pid
    if _held is not None:
        _inherited.append(_held)
    _pool, _pool_pid = None, None  # its threads stayed in the parent


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_hold_for_child, after_in_parent=_release_in_parent, after_in_child=_keep_in_child
    )

_pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
_pool_pid: Optional[int] = None
_pool_lock = threading.Lock()


def _threads() -> concurrent.futures.ThreadPoolExecutor:
    """This process's pool for filesystems that block."""
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = concurrent.futures.ThreadPoolExecutor(
                _POOL_THREADS, thread_name_prefix="tfrec-fast-io"
            )
            _pool_pid = os.getpid()
        return _pool


def _own_options(protocol: str, options: Mapping[str, Any], settings: Settings) -> dict:
    """storage_options plus what the store needs: s3fs's connection pool is 10 by default,
    which would serialise concurrent ranges, and botocore retries by itself unless told not to."""
    options = dict(options)
    if protocol in ("s3", "s3a"):
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("max_pool_connections", max(10, settings.concurrency))
        config.setdefault("retries", {"total_max_attempts": 1})
        options["config_kwargs"] = config
    return options


def location_of_url(text: str, options: Mapping[str, Any], settings: Settings) -> Location:
    """The Location of a URL, on the fsspec filesystem its protocol names."""
    fsspec = fsspec_module()
    protocol = fsspec.core.split_protocol(text.split("::")[-1])[0] or ""
    try:
        fs, path = fsspec.core.url_to_fs(text, **_own_options(protocol, options, settings))
    except ImportError as error:  # fsspec's words name the package ("Install s3fs to ...")
        raise ImportError(f"{redact(text)}: {error}") from error
    _tune(fs)
    return Location(FsspecStore(_FileSystem(fs, own=True), settings, urls=True), path, text)


def location_on(filesystem, text: str, settings: Settings) -> Location:
    """The Location of a path (or URL) on a filesystem the caller made."""
    fs = as_fsspec(filesystem)
    store = FsspecStore(_FileSystem(fs, own=False), settings, urls=is_url(text), given=True)
    return Location(store, _fs_path(fs, text), text)


def _fs_path(fs, text: str) -> str:
    """What ``fs`` calls the path or URL ``text``."""
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    if is_url(text) and not any(p.startswith("http") for p in protocols):
        text = text.split("://", 1)[1]
    return fs._strip_protocol(text)


def _time(value) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, datetime):
        return repr(value.timestamp())
    return str(value)


def stat_of(info: Mapping[str, Any], name: str) -> Stat:
    """A Stat from an fsspec info dict (or listing entry)."""
    if info.get("type") == "directory":
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name)
    size = info.get("size", info.get("Size"))
    etag = info.get("ETag") or info.get("etag") or info.get("e_tag")
    version = info.get("VersionId") or info.get("version_id") or info.get("generation")
    mtime = (
        info.get("LastModified")
        or info.get("Last-Modified")
        or info.get("mtime")
        or info.get("last_modified")
        or info.get("updated")
        or info.get("created")
    )
    return Stat(
        None if size is None else int(size),
        None if etag is None else str(etag),
        None if version in (None, "", "null") else str(version),
        _time(mtime),
    )


class FsspecStore(Store):
    """A store over an fsspec filesystem (see the module docstring).

    Parameters
    ----------
    fs : filesystem holder
        The fsspec filesystem (made again in a new process).
    settings : Settings
        Retries, range size, read-ahead and concurrency.
    urls : bool
        Paths are named as URLs (else as the caller named them, with ``filesystem=``).
    given : bool, default False
        The caller made the filesystem: it keeps its own retry settings, and retries here do
        not come on top.
    """

    whole_objects = True
    cache_counts = True

    def __init__(self, fs: _FileSystem, settings: Settings, *, urls: bool, given: bool = False):
        self._fs = fs
        self.settings = settings
        self._urls = urls
        self._given = given

    def __getstate__(self):
        return {"fs": self._fs, "settings": self.settings, "urls": self._urls, "given": self._given}

    def __setstate__(self, state):
        self.__init__(state["fs"], state["settings"], urls=state["urls"], given=state["given"])

    @property
    def fs(self):
        return self._fs.get()

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, FsspecStore)
            and type(self.fs) is type(other.fs)
            and self.fs.protocol == other.fs.protocol
        )

    def __hash__(self) -> int:
        return hash(type(self.fs))

    def __repr__(self) -> str:
        return f"FsspecStore({type(self.fs).__name__})"

    @property
    def backend(self) -> str:
        return _backend(self.fs)

    @property
    def backend_retries(self) -> bool:
        """Whether the filesystem retries failed requests by itself."""
        backend = self.backend
        return backend in ("gcs", "arrow") or (backend == "s3" and self._given)

    # -- naming --

    def url(self, path: str) -> str:
        return self.fs.unstrip_protocol(path) if self._urls else path

    def name(self, path: str) -> str:
        return redact(self.url(path))

    def key(self, path: str) -> str:
        return redact(self.fs.unstrip_protocol(path))

    def has_magic(self, path: str) -> bool:
        if self.backend == "http":
            path = urllib.parse.urlsplit(path).path  # "?" starts a query, not a wildcard
        return _glob.has_magic(path)

    def join(self, base: str, *names: str) -> str:
        return posixpath.join(base, *names)

    def split(self, path: str) -> Tuple[str, str]:
        return posixpath.split(path)

    def relative(self, path: str, start: str) -> str:
        return posixpath.relpath(path, start)

    def abspath(self, path: str) -> str:
        return path.rstrip("/") or "/"

    def same(self, a: str, b: str) -> bool:
        return a.rstrip("/") == b.rstrip("/")

    # -- retries --

    def _sync(
        self,
        call: Callable[[], Any],
        what: str,
        path: str,
        offset: Optional[int] = None,
        pinned: bool = False,
    ):
        """call() in this thread, retried as storage/retry.py says."""
        name = self.name(path)
        waits = delays(self.settings)
        attempts = 0
        while True:
            attempts += 1
            try:
                return call()
            except Exception as error:
                final = final_error(error, name, offset, pinned)
                if final is error:
                    raise
                if final is not None:
                    raise final from error
                wait = next(waits, None) if retryable(error, self.backend_retries) else None
                if wait is None:
                    raise gave_up(what, name, offset, attempts, error) from error
            time.sleep(wait)

    async def _async(
        self,
        call: Callable[[], Any],
        what: str,
        path: str,
        offset: Optional[int] = None,
        pinned: bool = False,
    ):
        """await call(), on the filesystem's event loop, retried as storage/retry.py says."""
        name = self.name(path)
        waits = delays(self.settings)
        attempts = 0
        while True:
            attempts += 1
            try:
                return await call()
            except Exception as error:
                final = final_error(error, name, offset, pinned)
                if final is error:
                    raise
                if final is not None:
                    raise final from error
                wait = next(waits, None) if retryable(error, self.backend_retries) else None
                if wait is None:
                    raise gave_up(what, name, offset, attempts, error) from error
            await asyncio.sleep(wait)

    def _is_async(self, fs) -> bool:
        from fsspec.asyn import AsyncFileSystem

        return isinstance(fs, AsyncFileSystem) and not fs.asynchronous

    # -- metadata --

    def stat(self, path: str) -> Stat:
        fs = self.fs

        def info():
            fs.invalidate_cache(path)  # asked afresh, not from a listing cached earlier
            return fs.info(path)

        return stat_of(self._sync(info, "looking up", path), self.name(path))

    def stat_many(self, paths: Sequence[str]) -> list:
        fs = self.fs
        if not self._is_async(fs) or len(paths) < 2:
            return super().stat_many(paths)

        async def each(path):
            fs.invalidate_cache(path)
            info = await self._async(lambda: fs._info(path), "looking up", path)
            return stat_of(info, self.name(path))

        async def every():
            limit = asyncio.Semaphore(self.settings.concurrency)

            async def one(path):
                async with limit:
                    return await each(path)

            return await asyncio.gather(*map(one, paths), return_exceptions=True)

        return asyncio.run_coroutine_threadsafe(every(), fs.loop).result()

    def exists(self, path: str) -> bool:
        fs = self.fs

        def exists():
            fs.invalidate_cache(path)
            return bool(fs.exists(path))

        return self._sync(exists, "looking up", path)

    def isdir(self, path: str) -> bool:
        fs = self.fs
        return bool(self._sync(lambda: fs.isdir(path), "looking up", path))

    def listdir(self, path: str) -> List[str]:
        fs = self.fs

        def ls():
            fs.invalidate_cache(path)
            return fs.ls(path, detail=False)

        try:
            entries = self._sync(ls, "listing", path)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(posixpath.basename(e.rstrip("/")) for e in entries)

    def glob(self, pattern: str) -> List[Tuple[str, Optional[Stat]]]:
        fs = self.fs
        found = self._sync(lambda: fs.glob(pattern, detail=True), "listing", pattern)
        hidden_ok = posixpath.basename(pattern).startswith(".")
        out = []
        for path in sorted(found):
            info = found[path]
            if info.get("type") == "directory" or (
                not hidden_ok and posixpath.basename(path).startswith(".")
            ):
                continue
            stat = stat_of(info, self.name(path))
            out.append((path, stat if stat.size is not None else None))
        return out

    # -- reading --

    def read(
        self,
        path: str,
        start: Optional[int] = None,
        end: Optional[int] = None,
        stat: Optional[Stat] = None,
    ) -> bytes:
        if start is None and end is None:
            fs = self.fs
            return self._sync(lambda: fs.cat_file(path), "reading", path, 0)
        start = 0 if start is None else start
        if end is None:
            end = (stat or self.stat(path)).size
            if end is None:
                raise OSError(errno.EIO, "the server does not tell the size", self.name(path))
        return self.fetch(path, start, end, stat).result()

    def fetch(
        self, path: str, start: int, end: int, stat: Optional[Stat]
    ) -> "concurrent.futures.Future[bytes]":
        fs = self.fs
        if self._is_async(fs):
            return asyncio.run_coroutine_threadsafe(
                self._fetch_async(fs, path, start, end, stat), fs.loop
            )
        return _threads().submit(self._fetch_sync, fs, path, start, end, stat)

    def read_ranges(
        self, path: str, starts: Sequence[int], ends: Sequence[int], stat: Optional[Stat] = None
    ) -> List[bytes]:
        """Bytes [starts[k], ends[k]) for each k, ``settings.concurrency`` requests in flight;
        on failure the error of the first range (in order) that failed."""
        fs = self.fs
        if self._is_async(fs):

            async def every():
                limit = asyncio.Semaphore(self.settings.concurrency)

                async def one(a, b):
                    async with limit:
                        return await self._fetch_async(fs, path, a, b, stat)

                return await asyncio.gather(*map(one, starts, ends), return_exceptions=True)

            got = asyncio.run_coroutine_threadsafe(every(), fs.loop).result()
        else:
            futures = [
                _threads().submit(self._fetch_sync, fs, path, a, b, stat)
                for a, b in zip(starts, ends)
            ]
            got = [f.exception() or f.result() for f in futures]
        for data in got:
            if isinstance(data, BaseException):
                raise data
        return got

    async def _fetch_async(
        self, fs, path: str, start: int, end: int, stat: Optional[Stat]
    ) -> bytes:
        if end <= start:
            return b""
        call = self._range_coroutine(fs, path, start, end, stat)

        async def checked():
            data = await call()
            if len(data) != end - start:
                raise ShortRead(f"asked for {end - start} bytes, got {len(data)}")
            return data

        return await self._async(checked, "reading", path, start, pinned=stat is not None)

    def _fetch_sync(self, fs, path: str, start: int, end: int, stat: Optional[Stat]) -> bytes:
        if end <= start:
            return b""
        seekable = {"seekable": True} if self.backend == "arrow" else {}

        def checked():
            # (pyarrow's, through fsspec's wrapper, as a seekable file: the wrapper opens a
            # stream for start=0, which cannot tell() where it is)
            data = fs.cat_file(path, start=start, end=end, **seekable)
            if len(data) != end - start:
                raise ShortRead(f"asked for {end - start} bytes, got {len(data)}")
            return data

        return self._sync(checked, "reading", path, start, pinned=stat is not None)

    def _range_coroutine(self, fs, path: str, start: int, end: int, stat: Optional[Stat]):
        """A function making the coroutine that fetches [start, end) at the version of
        ``stat`` where the store can be asked for one."""
        backend = self.backend
        if backend == "s3":
            return lambda: _s3_range(fs, path, start, end, stat)
        if backend == "gcs" and stat is not None and stat.version_id:
            return lambda: fs._cat_file(path, start=start, end=end, generation=stat.version_id)
        if (
            backend == "http" and stat is not None and stat.etag and not stat.etag.startswith("W/")
        ):  # If-Match compares strong ETags only
            headers = dict(fs.kwargs.get("headers") or {}, **{"If-Match": stat.etag})
            return lambda: fs._cat_file(path, start=start, end=end, headers=headers)
        return lambda: fs._cat_file(path, start=start, end=end)

    def open_input(
        self, path: str, start: int = 0, end: Optional[int] = None, stat: Optional[Stat] = None
    ):
        from .streaming import ReadAhead

        location = Location(self, path, stat=stat)
        return ReadAhead([location], [(start, end)]).open(0, owner=True)

    def open_stream(self, path: str, start: int = 0):
        """fsspec's own file, for an object whose size the server does not tell."""
        fs = self.fs
        f = self._sync(
            lambda: fs.open(path, "rb", block_size=self.settings.range_size), "opening", path
        )
        if start:
            f.seek(start)
        return f

    # -- writing --

    def open_output(self, path: str):
        """A binary file that streams to the object (multipart uploads where the filesystem
        does them); the object appears whole when it is closed, never after ``discard()``."""
        fs = self.fs
        try:
            return fs.open(path, "wb", block_size=WRITE_BLOCK_SIZE)
        except Exception as error:
            final = final_error(error, self.name(path))
            if final is None or final is error:
                raise
            raise final from error

    def write_bytes(self, path: str, data: bytes, sync: bool = False) -> None:
        """Puts a whole small object in one request (atomic on object stores)."""
        fs = self.fs
        self._sync(lambda: fs.pipe_file(path, data), "writing", path, 0)

    def rename(self, source: str, target: str) -> None:
        """Moves the object (a server-side copy and delete on object stores)."""
        fs = self.fs
        self._sync(lambda: fs.mv(source, target), "renaming", source)

    def remove(self, path: str) -> None:
        fs = self.fs
        self._sync(lambda: fs.rm_file(path), "removing", path)

    def makedirs(self, path: str) -> None:
        fs = self.fs
        self._sync(lambda: fs.makedirs(path, exist_ok=True), "creating", path)


async def _s3_range(fs, path: str, start: int, end: int, stat: Optional[Stat]) -> bytes:
    """GetObject of [start, end) at the planned version: VersionId where the bucket keeps
    versions, else If-Match on the ETag (a rewritten object is refused with 412)."""
    bucket, key, version = fs.split_path(path)
    pin = {}
    version = version or (stat.version_id if stat is not None else None)
    if version:
        pin["VersionId"] = version
    elif stat is not None and stat.etag:
        pin["IfMatch"] = stat.etag
    response = await fs._call_s3(
        "get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}", **pin
    )
    body = response["Body"]
    try:
        return await body.read()
    finally:
        body.close()
