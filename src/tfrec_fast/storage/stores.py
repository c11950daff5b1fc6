"""What a store is: the small interface every kind of storage implements, and the local one.

A store names its objects by its own path strings (a local path, or what an fsspec filesystem
calls an object) and offers metadata, reads (whole, ranges, streams) and writes (atomic small
files, streamed outputs that appear only when complete, renames). The rest of the package holds
a :class:`~tfrec_fast.storage.Location` (a store and a path) and never asks which store it has;
where native code can open a file itself, :attr:`Store.os_path` says so.
"""

from __future__ import annotations

import errno
import glob as _glob
import io
import os
import posixpath
import secrets
from concurrent.futures import Future
from typing import Any, BinaryIO, List, NamedTuple, Optional, Sequence, Tuple

__all__ = ["Stat", "Store", "LocalStore", "LOCAL"]


class Stat(NamedTuple):
    """What a store tells about an object: its size and what changes when it is rewritten.

    ``etag`` (S3, HTTP, Azure), ``version_id`` (an S3 VersionId, a GCS generation) and ``mtime``
    are whatever the store gives (None when it gives nothing); ``version`` is the most precise of
    them, a token that differs between two versions of the object.

    Attributes
    ----------
    size : int or None
        The object's size in bytes (None: the server does not tell).
    etag : str or None
        Its ETag (S3, HTTP, Azure).
    version_id : str or None
        An S3 VersionId or a GCS generation.
    mtime : str or None
        Its modification time, as the store gives it.
    """

    size: Optional[int]
    etag: Optional[str] = None
    version_id: Optional[str] = None
    mtime: Optional[str] = None

    @property
    def version(self) -> Optional[str]:
        """The most precise version token: ``version:...``, ``etag:...`` or
        ``size+mtime:...``; None when the store gives nothing to tell versions apart."""
        if self.version_id:
            return f"version:{self.version_id}"
        if self.etag:
            return f"etag:{self.etag}"
        if self.mtime is not None and self.size is not None:
            return f"size+mtime:{self.size}:{self.mtime}"
        return None

    def differs(self, other: "Stat") -> bool:
        """Whether ``other`` is another version of the object (unknown versions: by size).

        Parameters
        ----------
        other : Stat
            The object's stat, asked again.

        Returns
        -------
        bool
        """
        mine, theirs = self.version, other.version
        if mine is not None and theirs is not None and mine.split(":")[0] == theirs.split(":")[0]:
            return mine != theirs
        return self.size != other.size


class Store:
    """The interface of a store (see the module docstring). Paths are the store's strings.

    Naming: :meth:`url` (what the user passes back: a URL or a local path), :meth:`name` (the
    same with credentials masked, for messages), :meth:`join`, :meth:`split`, :meth:`relative`,
    :meth:`abspath`. Metadata: :meth:`stat`, :meth:`exists`, :meth:`isdir`, :meth:`listdir`,
    :meth:`glob`. Reading: :meth:`read`, :meth:`read_ranges`, :meth:`fetch` (one range, as a
    future), :meth:`open_input`. Writing: :meth:`open_output` (``close()`` publishes,
    ``discard()`` abandons), :meth:`write_bytes` (atomic), :meth:`rename`, :meth:`remove`,
    :meth:`makedirs`, :meth:`fsync`, :meth:`fsync_dir`.
    """

    #: Objects are replaced whole, never changed in place: a new version is a new object, and a
    #: reader that finds damage asks whether the object changed under it.
    whole_objects = False
    #: Counts and indexes of its objects are worth keeping on local disk (storage/cache.py):
    #: counting one means downloading it.
    cache_counts = False

    def os_path(self, path: str) -> Optional[str]:
        """The operating-system path native code may open itself, or None."""
        return None

    def url(self, path: str) -> str:
        raise NotImplementedError

    def name(self, path: str) -> str:
        return self.url(path)

    def key(self, path: str) -> str:
        """Names the object across processes and runs (cache keys): no credentials."""
        return self.name(path)

    def has_magic(self, path: str) -> bool:
        return _glob.has_magic(path)

    # -- naming (POSIX style by default) --

    def join(self, base: str, *names: str) -> str:
        raise NotImplementedError

    def split(self, path: str) -> Tuple[str, str]:
        raise NotImplementedError

    def dirname(self, path: str) -> str:
        return self.split(path)[0]

    def basename(self, path: str) -> str:
        return self.split(path.rstrip("/"))[1]

    def relative(self, path: str, start: str) -> str:
        raise NotImplementedError

    def normpath(self, path: str) -> str:
        return posixpath.normpath(path)

    def abspath(self, path: str) -> str:
        raise NotImplementedError

    def same_store(self, other: "Store") -> bool:
        return self == other

    def same(self, a: str, b: str) -> bool:
        """Whether two paths of this store name one object."""
        return a == b

    # -- metadata --

    def stat(self, path: str) -> Stat:
        """The object's size and version, asked afresh.

        Parameters
        ----------
        path : str
            The object.

        Returns
        -------
        Stat

        Raises
        ------
        FileNotFoundError
            There is no such object.
        IsADirectoryError
            It is a directory.
        PermissionError
            Credentials are missing or refused.
        """
        raise NotImplementedError

    def stat_many(self, paths: Sequence[str]) -> list:
        """:meth:`stat` of each path, concurrently where the store can.

        Parameters
        ----------
        paths : sequence of str
            The objects.

        Returns
        -------
        list of Stat or Exception
            In the order of ``paths``, the exception in place of a Stat where it failed.
        """
        out: list = []
        for path in paths:
            try:
                out.append(self.stat(path))
            except Exception as error:  # returned in place, as for a concurrent store
                out.append(error)
        return out

    def exists(self, path: str) -> bool:
        raise NotImplementedError

    def isdir(self, path: str) -> bool:
        raise NotImplementedError

    def listdir(self, path: str) -> List[str]:
        """Names in a directory, sorted (none if it does not exist).

        Parameters
        ----------
        path : str
            The directory.

        Returns
        -------
        list of str
            Base names.
        """
        raise NotImplementedError

    def glob(self, pattern: str) -> List[Tuple[str, Optional[Stat]]]:
        """The objects matching a glob pattern.

        Parameters
        ----------
        pattern : str
            A path with ``*``, ``?``, ``[...]`` or ``**``.

        Returns
        -------
        list of (str, Stat or None)
            Each match's path and the Stat its listing gave, sorted by path.
        """
        raise NotImplementedError

    # -- reading --

    def read(
        self,
        path: str,
        start: Optional[int] = None,
        end: Optional[int] = None,
        stat: Optional[Stat] = None,
    ) -> bytes:
        """Bytes [start, end) of an object (all of it by default).

        Parameters
        ----------
        path : str
            The object.
        start : int, optional
            The byte range.
        end : int, optional
            The byte range.
        stat : Stat, optional
            The version to read (a store that can refuses another).

        Returns
        -------
        bytes

        Raises
        ------
        FileNotFoundError
            There is no such object.
        ObjectChangedError
            The object is no longer at the version of ``stat``.
        OSError
            The read failed (after the store's retries), naming the object and the offset.
        """
        raise NotImplementedError

    def fetch(self, path: str, start: int, end: int, stat: Optional[Stat]) -> "Future[bytes]":
        """Bytes [start, end) as a future (errors typed and retried as for :meth:`read`).

        Parameters
        ----------
        path : str
            The object.
        start : int
            The byte range.
        end : int
            The byte range.
        stat : Stat or None
            The version to read.

        Returns
        -------
        concurrent.futures.Future
            Of the bytes, or of the error :meth:`read` would raise.
        """
        future: Future = Future()
        try:
            future.set_result(self.read(path, start, end, stat))
        except BaseException as error:
            future.set_exception(error)
        return future

    def read_ranges(
        self, path: str, starts: Sequence[int], ends: Sequence[int], stat: Optional[Stat] = None
    ) -> List[bytes]:
        """Bytes [starts[k], ends[k]) for each k (concurrently where the store can).

        Parameters
        ----------
        path : str
            The object.
        starts : sequence of int
            The byte ranges.
        ends : sequence of int
            The byte ranges.
        stat : Stat, optional
            The version to read.

        Returns
        -------
        list of bytes
            In the order of the ranges.

        Raises
        ------
        FileNotFoundError
            As for :meth:`read`.
        ObjectChangedError
            As for :meth:`read`.
        OSError
            As for :meth:`read`.
        """
        return [self.read(path, a, b, stat) for a, b in zip(starts, ends)]

    def open_input(
        self, path: str, start: int = 0, end: Optional[int] = None, stat: Optional[Stat] = None
    ) -> BinaryIO:
        """A binary file reading bytes [start, end) of an object (to its end by default).

        Parameters
        ----------
        path : str
            The object.
        start : int, default 0
            Where to start.
        end : int, optional
            Where to stop.
        stat : Stat, optional
            The version to read.

        Returns
        -------
        BinaryIO

        Raises
        ------
        FileNotFoundError
            There is no such object.
        """
        raise NotImplementedError

    def open_stream(self, path: str, start: int = 0) -> BinaryIO:
        """A plain stream of an object whose size is not known (no read-ahead).

        Parameters
        ----------
        path : str
            The object.
        start : int, default 0
            Where to start.

        Returns
        -------
        BinaryIO
        """
        return self.open_input(path, start)

    # -- writing --

    def open_output(self, path: str):
        """A binary file whose ``close()`` publishes the object whole and whose ``discard()``
        abandons it (nothing appears).

        Parameters
        ----------
        path : str
            The object to write.

        Returns
        -------
        binary file-like

        Raises
        ------
        OSError
            It cannot be created.
        """
        raise NotImplementedError

    def write_bytes(self, path: str, data: bytes, sync: bool = False) -> None:
        """Writes a small object atomically: readers see the old one or the whole new one.

        Parameters
        ----------
        path : str
            The object.
        data : bytes
            Its contents.
        sync : bool, default False
            Make it durable before returning.

        Raises
        ------
        OSError
            The write failed (the old object, if any, is left as it was).
        """
        raise NotImplementedError

    def rename(self, source: str, target: str) -> None:
        raise NotImplementedError

    def remove(self, path: str) -> None:
        raise NotImplementedError

    def makedirs(self, path: str) -> None:
        raise NotImplementedError

    def fsync(self, path: str) -> None:
        """Makes a written file durable (a completed upload already is)."""

    def fsync_dir(self, path: str) -> None:
        """Makes renames in a directory durable."""


class LocalStore(Store):
    """The local file system: os paths, atomic renames, fsync for durability."""

    def __eq__(self, other) -> bool:
        return isinstance(other, LocalStore)

    def __hash__(self) -> int:
        return hash(LocalStore)

    def __repr__(self) -> str:
        return "LocalStore()"

    def os_path(self, path: str) -> Optional[str]:
        return path

    def url(self, path: str) -> str:
        return path

    def key(self, path: str) -> str:
        return os.path.abspath(path)

    def join(self, base: str, *names: str) -> str:
        return os.path.join(base, *names)

    def split(self, path: str) -> Tuple[str, str]:
        return os.path.split(path)

    def relative(self, path: str, start: str) -> str:
        try:
            return os.path.relpath(path, start)
        except ValueError:  # another drive (Windows)
            return path

    def abspath(self, path: str) -> str:
        return os.path.abspath(path)

    def normpath(self, path: str) -> str:
        return os.path.normpath(path)

    def same(self, a: str, b: str) -> bool:
        """Whether two paths name one file (a link, `./a`, ...); by name if either is missing."""
        try:
            return os.path.samefile(a, b)
        except OSError:
            return os.path.abspath(a) == os.path.abspath(b)

    def stat(self, path: str) -> Stat:
        st = os.stat(path)
        if os.path.isdir(path):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        return Stat(st.st_size, mtime=f"{st.st_ino}:{st.st_mtime_ns}")

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def listdir(self, path: str) -> List[str]:
        try:
            return sorted(os.listdir(path))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def glob(self, pattern: str) -> List[Tuple[str, Optional[Stat]]]:
        return [(p, None) for p in sorted(_glob.glob(pattern, recursive=True))]

    def read(
        self,
        path: str,
        start: Optional[int] = None,
        end: Optional[int] = None,
        stat: Optional[Stat] = None,
    ) -> bytes:
        with open(path, "rb") as f:
            if start:
                f.seek(start)
            return f.read() if end is None else f.read(max(0, end - (start or 0)))

    def read_ranges(
        self, path: str, starts: Sequence[int], ends: Sequence[int], stat: Optional[Stat] = None
    ) -> List[bytes]:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        try:
            return [_pread_all(fd, b - a, a) for a, b in zip(starts, ends)]
        finally:
            os.close(fd)

    def open_input(
        self, path: str, start: int = 0, end: Optional[int] = None, stat: Optional[Stat] = None
    ) -> Any:
        f = open(path, "rb")
        if start:
            f.seek(start)
        return f if end is None else _Bounded(f, end)

    def open_output(self, path: str) -> "_LocalOutput":
        return _LocalOutput(path)

    def write_bytes(self, path: str, data: bytes, sync: bool = False) -> None:
        """Writes ``data`` to ``path`` atomically: readers see the old file or the whole new
        one (a hidden temporary file renamed into place, with the usual permissions)."""
        out = _LocalOutput(path)
        try:
            out.write(data)
            if sync:
                out.flush()
                os.fsync(out.fileno())
        except BaseException:
            out.discard()
            raise
        out.close()

    def rename(self, source: str, target: str) -> None:
        os.replace(source, target)

    def remove(self, path: str) -> None:
        os.remove(path)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def fsync(self, path: str) -> None:
        fd = os.open(path, os.O_RDWR)  # write access: Windows' fsync needs it
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def fsync_dir(self, path: str) -> None:
        if os.name == "nt":  # Windows cannot open a directory
            return
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


LOCAL = LocalStore()


def _pread_all(fd: int, n: int, offset: int) -> bytes:
    parts = []
    while n > 0:
        got = os.pread(fd, n, offset)
        if not got:
            break
        parts.append(got)
        n -= len(got)
        offset += len(got)
    return b"".join(parts)


class _Bounded(io.RawIOBase):
    """A file read up to byte ``end`` (a planned range of it), then at its end."""

    def __init__(self, f, end: int):
        super().__init__()
        self._f = f
        self._end = end
        self.name = f.name

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        left = self._end - self._f.tell()
        if left <= 0:
            return 0
        return self._f.readinto(view[:left])

    def close(self) -> None:
        self._f.close()
        super().close()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class _LocalOutput(io.FileIO):
    """A new file written under a hidden temporary name beside ``path``: ``close()`` renames it
    into place (publishes), ``discard()`` removes it."""

    def __init__(self, path: str):
        directory, base = os.path.split(os.path.abspath(path))
        self._target = path
        self._temp = os.path.join(directory, f".{base}.tmp-{secrets.token_hex(4)}")
        super().__init__(self._temp, "xb")
        self.name = path
        self._discarded = False

    def discard(self) -> None:
        self._discarded = True
        super().close()
        try:
            os.remove(self._temp)
        except OSError:
            pass

    def close(self) -> None:
        if self.closed:
            return
        super().close()
        if self._discarded:
            return
        try:
            os.chmod(self._temp, 0o666 & ~_umask())  # as a new file would be, not 0600
            os.replace(self._temp, self._target)
        except BaseException:
            try:
                os.remove(self._temp)
            except OSError:
                pass
            raise
