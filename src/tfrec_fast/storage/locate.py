"""Paths, URLs and globs -> Locations: which store holds a file, and what it is called there.

A path given with ``filesystem=`` (an fsspec or pyarrow filesystem) is on that filesystem; a URL
(``s3://``, ``gs://``, ``https://``, any fsspec protocol or chained URL) goes to fsspec with
``storage_options``; anything else, ``file://`` URLs included, is local. Globs expand on their
store, and the listing's sizes and versions stay with each match, so nothing asks for them
again.
"""

from __future__ import annotations

import errno
import os
from typing import Any, List, Mapping, Optional

from .paths import Location, file_url_path, is_url
from .settings import KEYS as SETTINGS_KEYS
from .settings import split_options
from .stores import LOCAL

__all__ = ["resolve", "resolve_beside", "expand", "options_for"]


def resolve(path, storage_options: Optional[Mapping[str, Any]] = None, filesystem=None) -> Location:
    """The Location of a path, URL or Location.

    With ``filesystem`` every path is on it (URLs too: their scheme is dropped). Otherwise a URL
    goes to fsspec with ``storage_options``, and anything else is local (``file://`` URLs
    included). ``storage_options`` may carry :class:`~tfrec_fast.storage.Settings` keys (for
    any path); other keys for a local path are an error, as in pandas.

    Parameters
    ----------
    path : str, bytes, os.PathLike or Location
        A path or URL (a Location is returned as it is).
    storage_options : mapping, optional
        fsspec's options for a URL, and Settings keys for any path.
    filesystem : fsspec.AbstractFileSystem or pyarrow.fs.FileSystem, optional
        The filesystem every path is on.

    Returns
    -------
    Location

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
            raise ValueError(
                "give storage_options or filesystem, not both: the filesystem "
                "was made with its options"
            )
        from .remote import location_on  # here: fsspec-related code only where it is used

        return location_on(filesystem, text, settings)
    local = file_url_path(text) if is_url(text) else text
    if local is not None:
        if fs_options:
            raise ValueError(
                f"storage_options are for URLs (s3://, gs://, https://, ...), "
                f"not the local path {text!r}"
            )
        return Location(LOCAL, local)
    from .remote import location_of_url

    return location_of_url(text, fs_options, settings)


def options_for(path, storage_options: Optional[Mapping[str, Any]]) -> Optional[dict]:
    """``storage_options`` where they apply to ``path`` (a URL of a store), else only their
    Settings keys (a command line gives one set of options for all its files).

    Parameters
    ----------
    path : str, bytes, os.PathLike or Location
        The file the options are for.
    storage_options : mapping, optional
        Options given for all the files.

    Returns
    -------
    dict or None
        The options to pass with ``path``; None when there are none (or ``path`` is a
        Location, which has its store already).
    """
    if not storage_options or isinstance(path, Location):
        return None
    text = os.fsdecode(os.fspath(path))
    if is_url(text) and file_url_path(text) is None:
        return dict(storage_options)
    return {k: v for k, v in storage_options.items() if k in SETTINGS_KEYS} or None


def resolve_beside(
    path, storage_options: Optional[Mapping[str, Any]] = None, filesystem=None
) -> Location:
    """The Location of a file named along with another that may be remote (an index beside
    its data): on ``filesystem`` when given; with ``storage_options`` when it is a URL; else
    local, whatever options the other file needed.

    Parameters
    ----------
    path : str, bytes, os.PathLike or Location
        The file's path or URL.
    storage_options : mapping, optional
        The options given for the other file.
    filesystem : fsspec.AbstractFileSystem or pyarrow.fs.FileSystem, optional
        The filesystem both are on.

    Returns
    -------
    Location

    Raises
    ------
    ValueError
        As for :func:`resolve`.
    ImportError
        As for :func:`resolve`.
    """
    if isinstance(path, Location) or filesystem is not None:
        return resolve(path, storage_options, filesystem)
    return resolve(path, options_for(path, storage_options))


def expand(
    path, storage_options: Optional[Mapping[str, Any]] = None, filesystem=None
) -> List[Location]:
    """A path or glob pattern -> the files it names: itself when it has no wildcard or exists
    (a literal name wins), else the files matching, sorted, each with the size and version its
    listing gave. A remote wildcard matches no leading "." of a name (as the local glob) and
    no directory.

    Parameters
    ----------
    path : str, bytes, os.PathLike or Location
        A path, URL or glob pattern (``*``, ``?``, ``[...]``, ``**``).
    storage_options
        As for :func:`resolve`.
    filesystem
        As for :func:`resolve`.

    Returns
    -------
    list of Location
        The files, sorted (one, for a name without wildcards).

    Raises
    ------
    FileNotFoundError
        No file matches the pattern (naming it).
    ValueError
        As for :func:`resolve`.
    ImportError
        As for :func:`resolve`.
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
