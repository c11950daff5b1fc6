"""Locations (a store and a path in it) and the URL helpers every module names files with.

Messages name files by :attr:`Location.name`: URLs with user info and query strings (signatures,
tokens) masked. Paths, URLs and globs become Locations in :mod:`tfrec_fast.storage.locate`.
"""

from __future__ import annotations

import errno
import os
import re
import urllib.parse
import urllib.request
from typing import List, Optional, Sequence

from .stores import Stat, Store

__all__ = ["Location", "is_url", "redact", "display", "file_url_path"]

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+(://|::)")
_USERINFO = re.compile(r"(?<=://)[^/@\s'\"]+@")
_QUERY = re.compile(r"(://[^\s'\"?#]*)\?[^\s'\"#]*")


def is_url(path) -> bool:
    """Whether ``path`` is a URL: ``scheme://...`` or an fsspec chained URL
    (``simplecache::s3://...``).

    Parameters
    ----------
    path : object
        Anything; only a ``str`` can be a URL.

    Returns
    -------
    bool
    """
    return isinstance(path, str) and _SCHEME.match(path) is not None


def redact(text: str) -> str:
    """``text`` with the user info (``user:password@``) and query strings (signatures, tokens)
    of any URL in it masked.

    Parameters
    ----------
    text : str
        A message, a URL or a path.

    Returns
    -------
    str
        The text with ``***`` in place of credentials.
    """
    return _QUERY.sub(r"\1?***", _USERINFO.sub("***@", text))


def file_url_path(url: str) -> Optional[str]:
    """The local path of a ``file://`` URL (None for other URLs)."""
    if not url.lower().startswith("file://"):
        return None
    parts = urllib.parse.urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        return None
    return urllib.request.url2pathname(parts.path)


class Location:
    """One file (or directory) in a store: ``store``, ``path`` (what the store calls it),
    ``url`` (what the user called it, or what a glob found: passes back to every function) and
    ``name`` (``url`` with credentials masked, for messages). A Location pickles, and is made
    usable again in a new process (after fork or spawn) with its store's own connections.

    :meth:`stat` is remembered once asked (or given by the listing that found the file), so a
    plan and the reads after it see one version of the object.

    Parameters
    ----------
    store : Store
        The store the file is in.
    path : str
        What the store calls it.
    url : str, optional
        What the user called it (default: the store's URL of ``path``).
    stat : Stat, optional
        Its size and version, when a listing gave them.
    """

    __slots__ = ("store", "path", "url", "name", "_stat")

    def __init__(
        self, store: Store, path: str, url: Optional[str] = None, stat: Optional[Stat] = None
    ):
        self.store = store
        self.path = path
        self.url = store.url(path) if url is None else url
        self.name = redact(self.url)
        self._stat = stat

    def __repr__(self) -> str:
        return f"Location({self.name!r})"

    def __str__(self) -> str:
        return self.name

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, Location)
            and self.path == other.path
            and self.store.same_store(other.store)
        )

    def __hash__(self) -> int:
        return hash(self.path)

    def __lt__(self, other: "Location") -> bool:  # sorted() lists of files, as of paths
        return self.url < other.url

    def __getstate__(self):
        return {"store": self.store, "path": self.path, "url": self.url, "stat": self._stat}

    def __setstate__(self, state):
        self.__init__(state["store"], state["path"], state["url"], state["stat"])

    # -- naming --

    @property
    def os_path(self) -> Optional[str]:
        """The operating-system path native code may open itself, or None (remote)."""
        return self.store.os_path(self.path)

    def sibling(self, path: str) -> "Location":
        """Another file of the same store, by its store path."""
        return Location(self.store, path)

    def join(self, name: str) -> "Location":
        return self.sibling(self.store.join(self.path, name))

    def with_suffix(self, suffix: str) -> "Location":
        """The file whose name is this one's plus ``suffix`` (``x.tfrecord`` -> ``.idx``)."""
        return Location(self.store, self.path + suffix, self.url + suffix)

    @property
    def parent(self) -> "Location":
        return self.sibling(self.store.dirname(self.path.rstrip("/")))

    @property
    def basename(self) -> str:
        return self.store.basename(self.path)

    # -- metadata --

    def stat(self, refresh: bool = False) -> Stat:
        """Size and version: from the listing that found the file, or asked once (``refresh``:
        asked again, and remembered)."""
        if self._stat is None or refresh:
            self._stat = self.store.stat(self.path)
        return self._stat

    @property
    def known_stat(self) -> Optional[Stat]:
        """The Stat remembered so far, without asking."""
        return self._stat

    def size(self) -> int:
        size = self.stat().size
        if size is None:
            raise OSError(errno.EIO, "the server does not tell the size", self.name)
        return size

    def exists(self) -> bool:
        return self.store.exists(self.path)

    def isdir(self) -> bool:
        return self.store.isdir(self.path)

    def listdir(self) -> List[str]:
        return self.store.listdir(self.path)

    # -- reading --

    def read(self, start: Optional[int] = None, end: Optional[int] = None) -> bytes:
        """Bytes [start, end) (the whole object by default), at the version of :meth:`stat`
        when a range is read."""
        if start is None and end is None:
            return self.store.read(self.path)
        stat = self.stat()
        return self.store.read(self.path, start, stat.size if end is None else end, stat)

    def read_ranges(self, starts: Sequence[int], ends: Sequence[int]) -> List[bytes]:
        return self.store.read_ranges(self.path, starts, ends, self.stat())

    def open_input(self, start: int = 0, end: Optional[int] = None):
        """A binary file reading [start, end) (to the end of the object by default)."""
        stat = self._stat if self.os_path is not None else self.stat()
        return self.store.open_input(self.path, start, end, stat)

    # -- writing --

    def open_output(self):
        """A binary file whose ``close()`` publishes the object whole; ``discard()`` abandons
        it (nothing appears)."""
        return self.store.open_output(self.path)

    def write_bytes(self, data: bytes, sync: bool = False) -> None:
        """Writes a small file atomically (a temporary file renamed; one PUT remotely)."""
        self.store.write_bytes(self.path, data, sync)

    def same_file(self, other: "Location") -> bool:
        """Whether both name one file (for a local file: a link to it, `./a`, ...)."""
        return self.store.same_store(other.store) and self.store.same(self.path, other.path)

    def rename(self, target: "Location") -> None:
        self.store.rename(self.path, target.path)

    def remove(self) -> None:
        self.store.remove(self.path)

    def makedirs(self) -> None:
        self.store.makedirs(self.path)


def display(path) -> str:
    """A path, URL or Location as messages name it (credentials masked).

    Parameters
    ----------
    path : str, bytes, os.PathLike or Location
        What to name.

    Returns
    -------
    str
    """
    if isinstance(path, Location):
        return path.name
    return redact(os.fsdecode(os.fspath(path)))
