"""What a planner needs to know about many objects without reading their data: sizes,
versions, and the indexes stored beside them.

:func:`describe` is for code that splits work across processes or machines (Ray read tasks,
DataLoader workers, ranks): it costs a listing per directory (or a metadata request per object
where the store cannot list), and one read of each ``URL.idx`` found, kept in the index cache.
It never reads the objects themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .. import _core
from .cache import cached_array
from .locate import expand
from .paths import Location
from .stores import Stat

__all__ = ["ObjectInfo", "describe", "find_indexes", "load_index"]

INDEX_SUFFIX = ".idx"


@dataclass(frozen=True)
class ObjectInfo:
    """One object of a plan.

    Attributes
    ----------
    location : Location
        The object (pickles; reads at the version below).
    stat : Stat
        Its size and version (``stat.size``, ``stat.version``).
    index_location : Location or None
        ``URL.idx`` beside it, when there is one.
    index : (offsets, sizes) or None
        That index, loaded (int64 arrays, read-only), when asked for.
    """

    location: Location
    stat: Stat
    index_location: Optional[Location] = None
    index: Optional[Tuple[np.ndarray, np.ndarray]] = None

    @property
    def url(self) -> str:
        return self.location.url

    @property
    def size(self) -> Optional[int]:
        return self.stat.size

    @property
    def version(self) -> Optional[str]:
        return self.stat.version


def describe(
    paths,
    *,
    storage_options: Optional[Mapping[str, Any]] = None,
    filesystem=None,
    indexes: bool = True,
    load: bool = True,
) -> List[ObjectInfo]:
    """Sizes, versions and indexes of the files that paths (paths, URLs, globs, or a list of
    them) name, in order, without reading their data.

    Parameters
    ----------
    paths : str, os.PathLike, Location or a list of them
        Glob patterns expand (sorted), keeping their listing's sizes and versions.
    storage_options
        As for every reader.
    filesystem
        As for every reader.
    indexes : bool
        Look for ``URL.idx`` beside each object (one listing per directory).
    load : bool
        Read the indexes found (through the index cache: once per version per machine).

    Returns
    -------
    list of ObjectInfo

    Raises
    ------
    FileNotFoundError
        A path that does not exist, or a pattern that matches nothing.
    """
    if (
        isinstance(paths, (str, bytes))
        or hasattr(paths, "__fspath__")
        or isinstance(paths, Location)
    ):
        paths = [paths]
    locations: List[Location] = []
    for path in paths:
        locations.extend(expand(path, storage_options, filesystem))
    stats = _stats(locations)
    index_locations = find_indexes(locations) if indexes else [None] * len(locations)
    out = []
    for loc, stat, ix in zip(locations, stats, index_locations):
        index = load_index(ix) if ix is not None and load else None
        out.append(ObjectInfo(loc, stat, ix, index))
    return out


def _stats(locations: Sequence[Location]) -> List[Stat]:
    """The Stat of each Location: from its listing, else asked (concurrently per store)."""
    todo = [loc for loc in locations if loc.known_stat is None]
    by_store: Dict[int, List[Location]] = {}
    for loc in todo:
        by_store.setdefault(id(loc.store), []).append(loc)
    for group in by_store.values():
        for loc, stat in zip(group, group[0].store.stat_many([loc.path for loc in group])):
            if isinstance(stat, BaseException):
                raise stat
            loc._stat = stat
    return [loc.stat() for loc in locations]


def find_indexes(locations: Sequence[Location]) -> List[Optional[Location]]:
    """``URL.idx`` of each object where it exists: one listing of each directory, or where a
    store lists nothing (HTTP servers), a metadata request per candidate.

    Parameters
    ----------
    locations : sequence of Location
        The data files.

    Returns
    -------
    list of Location or None
        The index beside each file, or None where there is none.

    Raises
    ------
    OSError
        A listing or a metadata request failed for another reason than a missing file.
    """
    out: List[Optional[Location]] = [None] * len(locations)
    if not locations:
        return out
    by_dir: Dict[Tuple[int, str], List[int]] = {}
    for k, loc in enumerate(locations):
        by_dir.setdefault((id(loc.store), loc.store.dirname(loc.path)), []).append(k)
    for (_, directory), ks in by_dir.items():
        store = locations[ks[0]].store
        names = set(store.listdir(directory)) if directory else set()
        if names:
            for k in ks:
                if locations[k].basename + INDEX_SUFFIX in names:
                    out[k] = locations[k].with_suffix(INDEX_SUFFIX)
            continue
        candidates = [locations[k].with_suffix(INDEX_SUFFIX) for k in ks]
        stats = store.stat_many([c.path for c in candidates])
        for k, candidate, stat in zip(ks, candidates, stats):
            if not isinstance(stat, BaseException):
                candidate._stat = stat
                out[k] = candidate
            elif not isinstance(stat, (FileNotFoundError, IsADirectoryError)):
                raise stat
    return out


def load_index(location: Location) -> Tuple[np.ndarray, np.ndarray]:
    """(offsets, sizes) of an index file (the text format of the tfrecord package and DALI),
    read once per version of it per machine (the index cache).

    Parameters
    ----------
    location : Location
        The index file.

    Returns
    -------
    offsets : numpy.ndarray
        int64, read-only: each record's header offset and framed size.
    sizes : numpy.ndarray
        int64, read-only: each record's header offset and framed size.

    Raises
    ------
    FileNotFoundError
        The index file does not exist.
    ValueError
        The file is not an index (naming the line).
    """

    def parse() -> np.ndarray:
        if location.os_path is not None:  # not cached: read as it is now
            data = location.read()
        else:  # cached under the version of its stat: read that version (a pinned range)
            size = location.stat().size
            data = b"" if size == 0 else location.read(0, size)
        offsets, sizes = _core.parse_index(data, location.name)
        return np.stack([offsets, sizes])

    both = cached_array(location, "idx", parse)
    return both[0], both[1]
