"""Every place the Ray reader and writer touch storage: paths (and glob patterns) resolved to one
pyarrow filesystem as Ray resolves them, the listing (sizes, and the ``FILE.idx`` index files it
shows), opening a file or a range of its records for reading, and opening an output file.

Ray lists and names the files (its pyarrow filesystem, its metadata provider); tfrec_fast's
storage layer (:mod:`tfrec_fast.storage`) reads them: a remote object as a
:class:`~tfrec_fast.storage.Location` streamed by ranges ahead of the reader, at the size its
listing gave (no request to learn it), an index beside it through the index cache.
"""

from __future__ import annotations

import contextlib
import fnmatch
import glob
import posixpath
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
from ray.data.datasource.file_meta_provider import DefaultFileMetadataProvider
from ray.data.datasource.path_util import _resolve_paths_and_filesystem

from ..index import IndexedTFRecordReader, write_index
from ..records import DEFAULT_BUFFER_SIZE, TFRecordReader
from ..storage import Location, Stat, load_index, resolve

INDEX_SUFFIX = ".idx"
# The compressions tfrec_fast reads itself; any other codec Ray reads (bz2, zstd, lz4, brotli)
# is inflated by pyarrow's stream and the records read from that.
OWN_COMPRESSIONS = ("gzip", "zlib")
# What the reader asks a remote pyarrow stream (a file of another codec, inflated by pyarrow) for
# at a time: each read is a request, so the fewer the better, as long as the buffer stays small
# beside a block.
REMOTE_READ_BYTES = 8 << 20


# ---- paths ---------------------------------------------------------------------------------------


def resolve_paths(
    paths, filesystem=None, storage_options=None, ignore_missing: bool = False
) -> Tuple[List[str], pafs.FileSystem]:
    """Ray's resolution of ``paths`` (a path, URL or directory, or a list of them) to one
    filesystem, with glob patterns (``*``, ``?``, ``[...]``, ``**``) expanded on it. A URL
    with ``storage_options`` gets the fsspec filesystem made with them."""
    if storage_options:
        if filesystem is not None:
            raise ValueError(
                "give storage_options or filesystem, not both: the filesystem "
                "was made with its options"
            )
        filesystem = _fsspec_filesystem(paths, storage_options)
    resolved, fs = _resolve_paths_and_filesystem(paths, filesystem)
    expanded: List[str] = []
    for path in resolved:
        expanded.extend(_expand(path, fs, ignore_missing))
    return expanded, fs


def _fsspec_filesystem(paths, storage_options):
    import fsspec

    first = paths if isinstance(paths, str) else next(iter(paths))
    fs, _ = fsspec.core.url_to_fs(str(first), **storage_options)
    return fs


def _expand(path: str, fs: pafs.FileSystem, ignore_missing: bool) -> List[str]:
    """[path] for a path without glob characters (or one that exists by that very name), else
    the files matching it, sorted; a wildcard matches no leading "." of a name, as the local
    glob. No match is FileNotFoundError, unless missing paths are ignored."""
    if not glob.has_magic(path) or fs.get_file_info(path).type != pafs.FileType.NotFound:
        return [path]
    parts = path.split("/")
    fixed = next(i for i, part in enumerate(parts) if glob.has_magic(part))
    base = "/".join(parts[:fixed]) or ("/" if path.startswith("/") else "")
    deep = "**" in parts[fixed:] or len(parts) - fixed > 1
    selector = pafs.FileSelector(base, recursive=deep, allow_not_found=True)
    found = sorted(
        info.path
        for info in fs.get_file_info(selector)
        if info.is_file and _matches(parts[fixed:], info.path[len(base) :].lstrip("/").split("/"))
    )
    if not found and not ignore_missing:
        raise FileNotFoundError(f"no file matches {path!r}")
    return found


def _matches(pattern: List[str], parts: List[str]) -> bool:
    """Whether path components match pattern components ("**": any number of them)."""
    if not pattern:
        return not parts
    head = pattern[0]
    if head == "**":
        return any(_matches(pattern[1:], parts[i:]) for i in range(len(parts) + 1))
    if not parts or (parts[0].startswith(".") and not head.startswith(".")):
        return False
    return fnmatch.fnmatchcase(parts[0], head) and _matches(pattern[1:], parts[1:])


class Listing(DefaultFileMetadataProvider):
    """Ray's listing (sizes from it, no request per file under a directory), keeping out of the
    data the index files it shows: ``FILE.idx`` beside a listed ``FILE`` is FILE's index (what
    ``tfrec_fast index`` and ``write_tfrecords(index=True)`` write)."""

    def __init__(self):
        super().__init__()
        self.indexes: Dict[str, str] = {}

    def expand_paths(
        self, paths, filesystem, partitioning=None, ignore_missing_paths: bool = False
    ) -> Iterator[Tuple[str, int]]:
        found = list(
            super().expand_paths(
                paths, filesystem, partitioning, ignore_missing_paths=ignore_missing_paths
            )
        )
        names = {path for path, _ in found}
        for path, size in found:
            if path.endswith(INDEX_SUFFIX) and path[: -len(INDEX_SUFFIX)] in names:
                self.indexes[path[: -len(INDEX_SUFFIX)]] = path
            else:
                yield path, size


def compression_of_name(path: str) -> str:
    """The codec Ray infers from a file name ("" for none)."""
    from ray.data._internal.util import infer_compression

    return infer_compression(path) or ""


# ---- reading -------------------------------------------------------------------------------------


def _unwrapped(fs):
    """The filesystem under Ray's retrying wrapper; an fsspec filesystem Ray wrapped for pyarrow
    comes back as itself."""
    fs = fs.unwrap() if hasattr(fs, "unwrap") else fs
    if isinstance(fs, pafs.PyFileSystem) and isinstance(fs.handler, pafs.FSSpecHandler):
        return fs.handler.fs
    return fs


def is_local(fs) -> bool:
    return isinstance(_unwrapped(fs), pafs.LocalFileSystem)


def location(
    fs, path: str, size: Optional[int] = None, settings: Optional[Dict[str, int]] = None
) -> Location:
    """The storage layer's Location of a file Ray listed on ``fs`` (its size from the listing:
    nothing asks for it again). ``settings``: storage Settings for its reads (read-ahead)."""
    base = _unwrapped(fs)
    known = None if size is None else Stat(int(size))
    if isinstance(base, pafs.LocalFileSystem):
        found = resolve(path)
    else:  # fsspec's, or another pyarrow filesystem (S3, GCS, HDFS ...) through fsspec's wrapper
        found = resolve(path, settings, filesystem=base)
    return Location(found.store, found.path, found.url, known)


@contextlib.contextmanager
def open_records(
    fs,
    path: str,
    size: Optional[int],
    compression: str,
    *,
    verify: bool,
    open_args: Dict[str, Any],
    prefix: Optional[int] = None,
) -> Iterator[TFRecordReader]:
    """A reader of the records of ``path``: a local file by its path (read in C++); a remote
    object by ranged reads ahead of the reader (tfrec_fast's storage layer). ``compression``:
    "", "gzip", "zlib" and "auto" are the reader's own; any other codec is inflated by the
    pyarrow stream of Ray's filesystem. ``prefix``: about how many bytes will be read (a
    sample), so that no more than that is fetched ahead."""
    own = compression if compression in ("", "auto") + OWN_COMPRESSIONS else ""
    codec = None if compression == own else compression
    buffer_size = DEFAULT_BUFFER_SIZE
    source: Any
    if codec is None:
        settings = None
        if prefix is not None:  # ranges of a quarter of it, one ahead of the reader
            ranges = max(64 << 10, prefix // 4)
            settings = {"range_size": ranges, "read_ahead": ranges}
            buffer_size = min(buffer_size, ranges)
        source = location(fs, path, size, settings)
    else:
        source = _arrow_fs(fs).open_input_stream(path, compression=codec, **open_args)
        if not isinstance(_unwrapped(fs), pafs.LocalFileSystem):  # each read is a request
            buffer_size = REMOTE_READ_BYTES if prefix is None else prefix + (64 << 10)
    try:
        with TFRecordReader(source, own, verify=verify, buffer_size=buffer_size) as reader:
            yield reader
    finally:
        if hasattr(source, "close"):
            source.close()


def _arrow_fs(fs) -> pafs.FileSystem:
    return fs.unwrap() if hasattr(fs, "unwrap") else fs


def record_ranges(
    fs,
    path: str,
    size: Optional[int],
    index_path: str,
    part: int,
    parts: int,
    *,
    verify: bool,
    batch_records: int,
) -> Iterator[Tuple[Any, int]]:
    """Part ``part`` of ``parts`` (by record count) of an uncompressed file with an index, as
    (RecordBatch, index of its first record) pairs of at most ``batch_records`` records."""
    offsets, sizes = load_index(location(fs, index_path))
    first, end = (len(offsets) * part) // parts, (len(offsets) * (part + 1)) // parts
    with IndexedTFRecordReader(location(fs, path, size), (offsets, sizes), verify=verify) as reader:
        for start in range(first, end, batch_records):
            stop = min(end, start + batch_records)
            yield reader.get_batch(np.arange(start, stop, dtype=np.int64)), start


# ---- writing -------------------------------------------------------------------------------------


def output_stream(fs, path: str, open_args: Dict[str, Any]) -> pa.NativeFile:
    """An output stream at ``path`` (never compressed by pyarrow: the writer compresses)."""
    return fs.open_output_stream(path, **open_args)


def write_index_file(fs, path: str, offsets: np.ndarray, sizes: np.ndarray) -> None:
    """Writes the index file ``path`` on ``fs`` (in one piece: no reader sees half of it)."""
    write_index(location(fs, path), offsets, sizes)


def join(directory: str, name: str) -> str:
    return posixpath.join(directory, name)
