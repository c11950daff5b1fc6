"""Paths, URLs and globs -> Locations: which store holds a file, and what it is called there.

A path given with ``filesystem=`` (an fsspec or pyarrow filesystem) is on that filesystem; a URL
(``s3://``, ``gs://``, ``https://``, any fsspec protocol or chained URL) goes to fsspec with
``storage_options``; anything else, ``file://`` URLs included, is local. Globs expand on their
store, and the listing's sizes and versions stay with each match, so nothing asks for them
again. Messages name files by :attr:`Location.name`: URLs with user info and query strings
(signatures, tokens) masked.
"""

from __future__ import annotations

import errno
import os
import re
import urllib.parse
import urllib.request
from typing import Any, List, Mapping, Optional, Sequence

from .settings import KEYS as SETTINGS_KEYS
from .settings import split_options
from .stores import LOCAL, Stat, Store

__all__ = ["Location", "is_url", "redact", "display", "resolve", "resolve_beside", "expand",
           "options_for"]

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+(://|::)")
_USERINFO = re.compile(r"(?<=://)[^/@\s'\"]+@")
_QUERY = re.compile(r"(://[^\s'\"?#]*)\?[^\s'\"#]*")


def is_url(path) -> bool:
    """True for ``scheme://...`` and fsspec chained URLs (``simplecache::s3://...``)."""
    return isinstance(path, str) and _SCHEME.match(path) is not None


def redact(text: str) -> str:
    """``text`` with the user info (``user:password@``) and query strings (signatures, tokens)
    of any URL in it masked."""
    return _QUERY.sub(r"\1?***", _USERINFO.sub("***@", text))


def _file_url_path(url: str) -> Optional[str]:
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
    """

    __slots__ = ("store", "path", "url", "name", "_stat")

    def __init__(self, store: Store, path: str, url: Optional[str] = None,
                 stat: Optional[Stat] = None):
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
        return isinstance(other, Location) and self.path == other.path and \
            self.store.same_store(other.store)

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
    """A path, URL or Location as messages name it (credentials masked)."""
    if isinstance(path, Location):
        return path.name
    return redact(os.fsdecode(os.fspath(path)))


def resolve(path, storage_options: Optional[Mapping[str, Any]] = None,
            filesystem=None) -> Location:
    """The Location of a path, URL or Location.

    With ``filesystem`` every path is on it (URLs too: their scheme is dropped). Otherwise a URL
    goes to fsspec with ``storage_options``, and anything else is local (``file://`` URLs
    included). ``storage_options`` may carry :class:`~tfrec_fast.storage.Settings` keys (for
    any path); other keys for a local path are an error, as in pandas.

    Raises
    ------
    ValueError
        fsspec options for a local path, or with ``filesystem``.
    ImportError
        A URL without fsspec (or without the package of its protocol).
    """
    if isinstance(path, Location):
        return path
    text = os.fsdecode(os.fspath(path))
    fs_options, settings = split_options(storage_options)
    if filesystem is not None:
        if fs_options:
            raise ValueError("give storage_options or filesystem, not both: the filesystem "
                             "was made with its options")
        from .remote import location_on
        return location_on(filesystem, text, settings)
    local = _file_url_path(text) if is_url(text) else text
    if local is not None:
        if fs_options:
            raise ValueError(f"storage_options are for URLs (s3://, gs://, https://, ...), "
                             f"not the local path {text!r}")
        return Location(LOCAL, local)
    from .remote import location_of_url
    return location_of_url(text, fs_options, settings)


def options_for(path, storage_options: Optional[Mapping[str, Any]]) -> Optional[dict]:
    """``storage_options`` where they apply to ``path`` (a URL of a store), else only their
    Settings keys (a command line gives one set of options for all its files)."""
    if not storage_options or isinstance(path, Location):
        return None
    text = os.fsdecode(os.fspath(path))
    if is_url(text) and _file_url_path(text) is None:
        return dict(storage_options)
    return {k: v for k, v in storage_options.items() if k in SETTINGS_KEYS} or None


def resolve_beside(path, storage_options: Optional[Mapping[str, Any]] = None,
                   filesystem=None) -> Location:
    """The Location of a file named along with another that may be remote (an index beside
    its data): on ``filesystem`` when given; with ``storage_options`` when it is a URL; else
    local, whatever options the other file needed."""
    if isinstance(path, Location) or filesystem is not None:
        return resolve(path, storage_options, filesystem)
    return resolve(path, options_for(path, storage_options))


def expand(path, storage_options: Optional[Mapping[str, Any]] = None,
           filesystem=None) -> List[Location]:
    """A path or glob pattern -> the files it names: itself when it has no wildcard or exists
    (a literal name wins), else the files matching, sorted, each with the size and version its
    listing gave. A remote wildcard matches no leading "." of a name (as the local glob) and
    no directory.

    Raises
    ------
    FileNotFoundError
        No file matches the pattern (naming it).
    """
    location = resolve(path, storage_options, filesystem)
    store = location.store
    if not store.has_magic(location.path) or _literal_exists(location):
        return [location]
    found = store.glob(location.path)
    if not found:
        raise FileNotFoundError(errno.ENOENT, "no file matches this pattern", location.name)
    return [Location(store, p, stat=stat) for p, stat in found]


def _literal_exists(location: Location) -> bool:
    if location.os_path is not None:
        return os.path.lexists(location.os_path)
    return location.exists()
