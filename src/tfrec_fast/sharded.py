"""Writing one data set as many TFRecord files ("shards"), described by a small JSON manifest.

Shards follow TensorFlow's naming convention, ``train-00003-of-00010.tfrecord``. Records go to
them round robin (``num_shards=N``) or fill one shard after another up to a size and/or record
count; either way the total is known only at the end, so:

Crash safety. Each shard is written under a hidden temporary name in its final directory,
``.train-00003.tfrecord.tmp-<token>``. Only a successful :meth:`ShardedWriter.close` renames the
shards to their final names (``os.replace``: atomic on one file system), after fsyncing them, then
writes the manifest (atomically too). A run that fails or is interrupted leaves nothing under a
final name; its completed records stay readable in the temporary files
(:attr:`ShardedWriter.partial_paths`).

Remote output (a URL such as ``s3://bucket/out``, see :mod:`tfrec_fast.storage`) follows the
same rule: each shard is uploaded (multipart, streaming) under its temporary name, and renamed
by a server-side copy at close; the manifest (see :mod:`tfrec_fast.manifest`), one PUT, comes
last and is the commit marker. :func:`read_manifest` reads it back with the spec rebuilt and the
shard paths resolved.
"""

from __future__ import annotations

import array
import contextlib
import operator
import os
import re
import secrets
from itertools import islice
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union

import numpy as np

from ._core import FRAMING_SIZE, RecordBatch
from .encode import encode_example, encode_examples
from .index import write_index
from .manifest import (
    MANIFEST_FORMAT,
    MANIFEST_VERSION,
    manifest_data,
    read_manifest,
    write_manifest,
)
from .records import DEFAULT_BUFFER_SIZE, TFRecordWriter, normalize_compression
from .spec import spec_from_json, spec_to_json
from .storage import Location, Store, resolve, resolve_beside

__all__ = [
    "ShardedWriter",
    "read_manifest",
    "spec_to_json",
    "spec_from_json",
    "DEFAULT_SHARD_BYTES",
    "MANIFEST_FORMAT",
    "MANIFEST_VERSION",
]

DEFAULT_SHARD_BYTES = 128 << 20  # framed, uncompressed: TensorFlow's advice is 100-200 MB files

_UNLIMITED = 1 << 62
_ITERABLE_CHUNK = 4096  # records gathered per RecordBatch when write_batch gets a plain iterable
# Round robin keeps every shard open; cap the buffers' total so 1000 shards stay affordable.
_ROUND_ROBIN_BUFFERS = 64 << 20
_MIN_BUFFER = 64 << 10

PathLike = Union[str, "os.PathLike[str]"]


# ---- naming ------------------------------------------------------------------------------------

# A printf integer field (flags, width, d/i/u), or the escape %% for a literal percent sign.
_FIELD = re.compile(r"%(?:%|[-+ #0]*\d*[diu])")


def _unescape(text: str) -> str:
    return text.replace("%%", "%")


class _Naming:
    """Final, temporary and family names of one output's shards, from a file name pattern with
    two integer fields (shard number, total)."""

    def __init__(self, store, directory: str, pattern: str, stem: Optional[str] = None):
        fields = [m for m in _FIELD.finditer(pattern) if m.group() != "%%"]
        if len(fields) != 2 or "%" in _FIELD.sub("", pattern):
            raise ValueError(
                "a shard name pattern needs exactly two printf integer fields (shard number, "
                "total) and no other % field (%% is a literal %), e.g. "
                f"'out/train-%05d-of-%05d.tfrecord'; got {pattern!r}"
            )
        first, second = fields
        self.store = store
        self.directory = directory
        self.pattern = pattern
        self._head = _unescape(pattern[: first.start()])
        self._number = first.group()
        self._tail = _unescape(pattern[second.end() :])
        mid = _unescape(pattern[first.end() : second.start()])
        number = r" *[+-]?\d+"  # what an integer field can print
        self._family = re.compile(
            re.escape(self._head)
            + number
            + re.escape(mid)
            + number
            + re.escape(self._tail)
            + r"(?:\.idx)?"
        )
        # Names the default manifest: the text before the first field, e.g. "train".
        self.stem = stem if stem is not None else self._head.rstrip("-_. ") or "shards"

    @classmethod
    def from_args(cls, store, path: str, prefix: Optional[str], suffix: str) -> "_Naming":
        if prefix is not None:
            _check_plain_name("prefix", prefix, allow_empty=False)
            _check_plain_name("suffix", suffix, allow_empty=True)
            pattern = prefix.replace("%", "%%") + "-%05d-of-%05d" + suffix.replace("%", "%%")
            return cls(store, store.abspath(path), pattern, prefix)
        directory, base = store.split(path)
        if any(m.group() != "%%" for m in _FIELD.finditer(directory)):
            raise ValueError(
                f"the shard number fields must be in the file name, not in the directory: {path!r}"
            )
        if "%" not in base:
            raise ValueError(
                "without prefix=, path must be a file name pattern with two integer fields, "
                f"e.g. 'out/train-%05d-of-%05d.tfrecord'; got {path!r} (to name shards in a "
                "directory, pass prefix=)"
            )
        return cls(store, store.abspath(_unescape(directory) or "."), base)

    def final(self, i: int, n: int) -> str:
        return self.store.join(self.directory, self.pattern % (i, n))

    def temp(self, i: int, token: str) -> str:
        # Hidden, and without the total (unknown yet); same directory, so os.replace is atomic.
        return self.store.join(
            self.directory, f".{self._head}{self._number % i}{self._tail}.tmp-{token}"
        )

    def default_manifest(self) -> str:
        return self.store.join(self.directory, f"{self.stem}.manifest.json")

    def family(self) -> List[str]:
        """Existing shard files (and their .idx files) of this naming, by any total."""
        return sorted(
            self.store.join(self.directory, name)
            for name in self.store.listdir(self.directory)
            if self._family.fullmatch(name)
        )


def _check_plain_name(what: str, name, *, allow_empty: bool) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, not {type(name).__name__}")
    seps = [s for s in (os.sep, os.altsep) if s]
    if (not name and not allow_empty) or any(s in name for s in seps) or name in (".", ".."):
        raise ValueError(f"{what} must be a plain file name part, not {name!r}")


# ---- where the output goes ---------------------------------------------------------------------


class _Output:
    """Where a ShardedWriter (and Ray's datasink) puts its files: a store of tfrec_fast.storage
    (naming, listing, renames, removal) with the writing verbs they use, by store paths."""

    def __init__(self, store: Store):
        self.store = store

    def __getattr__(self, name: str):  # join, split, dirname, relative, abspath, url, listdir,
        return getattr(self.store, name)  # exists, isdir, makedirs, remove

    def _at(self, path: str) -> Location:
        return Location(self.store, path)

    def writer(self, path: str, compression: str, level, buffer_size: int) -> TFRecordWriter:
        return TFRecordWriter(self._at(path), compression, level=level, buffer_size=buffer_size)

    def write_index(self, path: str, offsets, sizes) -> None:
        write_index(self._at(path), offsets, sizes)

    def write_json(self, path: str, data, token: str, sync: bool) -> None:
        write_manifest(self.store, path, data, sync)

    def replace(self, source: str, target: str) -> None:
        self.store.rename(source, target)

    def size(self, path: str) -> int:
        return self._at(path).size()

    def fsync_file(self, path: str) -> None:
        self.store.fsync(path)

    def fsync_directory(self, path: str) -> None:
        self.store.fsync_dir(path)

    def same(self, keep, path: str) -> bool:
        """Whether ``keep`` (a path, URL or Location given by the caller) is ``path``."""
        try:
            return resolve_beside(keep).same_file(self._at(path))
        except (ImportError, ValueError):  # a URL this process cannot resolve: not ours
            return False


def _store_for(path, storage_options, filesystem) -> Tuple[_Output, str]:
    """(store, path in it) for an output directory or shard name pattern."""
    if isinstance(path, Location):
        return _Output(path.store), path.path
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError(f"path must be a str or os.PathLike of str, not {type(text).__name__}")
    location = resolve(text, storage_options, filesystem)
    return _Output(location.store), location.path


# ---- the writer --------------------------------------------------------------------------------


class _Shard:
    """One shard: its temporary path, final path once renamed, writer (None once finished) and
    counts."""

    __slots__ = ("temp", "final", "writer", "records", "bytes", "sizes")

    def __init__(self, temp: str, writer: TFRecordWriter):
        self.temp = temp
        self.final: Optional[str] = None
        self.writer: Optional[TFRecordWriter] = writer
        self.records = 0
        self.bytes = 0
        self.sizes = array.array("q")  # framed size of each record, when an index is written

    @property
    def path(self) -> str:
        return self.final or self.temp

    @property
    def open_writer(self) -> TFRecordWriter:
        if self.writer is None:  # the writer hands out only shards being written
            raise RuntimeError(f"shard {self.temp} written to after it was finished")
        return self.writer

    def close_writer(self) -> None:
        """Closes the shard's file (its records complete); idempotent."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def _positive(name: str, value) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not bool")
    value = operator.index(value)
    if value < 1:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


class ShardedWriter:
    """Writes records (or Examples) into shards ``{prefix}-00000-of-0000N{suffix}``.

    Naming: with ``prefix``, ``path`` is a directory (created if missing) and shard ``i`` of ``n``
    is ``{path}/{prefix}-{i:05d}-of-{n:05d}{suffix}``. Without, ``path`` is a pattern with two
    printf integer fields, e.g. ``"out/train-%05d-of-%05d.tfrecord"``, formatted as
    ``pattern % (i, n)``; its default manifest is named after the text before the first field
    (``out/train.manifest.json``; ``shards.manifest.json`` if that text is empty).

    Sharding: ``num_shards=N`` sends record ``k`` to shard ``k % N`` (round robin, all N shards
    written, empty ones too; they are all open at once, so N is bounded by the open file limit).
    ``max_bytes_per_shard`` (framed uncompressed bytes: payload + 16 per record) and/or
    ``records_per_shard`` fill one shard after another, starting a new one when the next record
    would exceed either limit; a record larger than the byte limit gets a shard of its own. With
    none of the three, shards are cut at :data:`DEFAULT_SHARD_BYTES` (128 MiB). Size-cut output
    with no records is one empty shard.

    ``compression`` (None, "gzip", "zlib") and ``level`` as for :class:`TFRecordWriter`.
    ``index=True`` writes ``{shard}.idx`` next to each shard (the tfrecord/DALI format of
    :func:`~tfrec_fast.create_index`; uncompressed output only). ``manifest``: True (default
    name), False (none) or a path. ``spec``: the feature spec to record in the manifest.

    Existing output: with ``overwrite=False`` a shard of the same naming (any total), its index
    or the manifest already there raises ``FileExistsError`` at construction; with
    ``overwrite=True`` a successful close removes those not part of the new output. Temporary
    files of other runs are never touched. ``protect``: files the output must never replace or
    remove, whatever ``overwrite`` says (the data being converted, say): one that is an
    existing shard of this naming, its index or the manifest raises ``ValueError`` at
    construction, before anything is written.

    Use it as a context manager. A clean exit calls :meth:`close`, which fsyncs (``sync=True``),
    writes the indexes, renames the shards to their final names and writes the manifest. An
    exception (or closing after a failed write) leaves every completed record readable in the
    temporary files listed by :attr:`partial_paths`, and nothing under a final name. Not
    thread-safe.

    Parameters
    ----------
    path : str or os.PathLike
        The output directory (with ``prefix``) or a shard name pattern (without); a URL too.
    prefix : str, optional
        The shards' name before ``-00000-of-0000N``.
    num_shards : int, optional
        Round robin over this many shards.
    max_bytes_per_shard : int, optional
        Start a new shard before a record that would take the shard past this many framed
        bytes.
    records_per_shard : int, optional
        Start a new shard after this many records.
    compression : {None, "gzip", "zlib"}, optional
        The shards' compression.
    level : int, optional
        The zlib compression level.
    suffix : str, default ".tfrecord"
        The shards' name after the numbers.
    index : bool, default False
        Write ``{shard}.idx`` beside each shard (uncompressed output only).
    manifest : bool or str, default True
        Write the manifest under its default name (True), not at all (False), or at this path.
    spec : mapping, optional
        The feature spec recorded in the manifest.
    overwrite : bool, default False
        Replace an existing output of the same naming.
    protect : iterable of paths, optional
        Files the output must never replace or remove.
    sync : bool, default True
        fsync the shards, the indexes and the manifest on :meth:`close`.
    storage_options : dict, optional
        For URLs: fsspec's options.
    filesystem : fsspec.AbstractFileSystem or pyarrow.fs.FileSystem, optional
        The filesystem ``path`` is on.

    Raises
    ------
    ValueError
        Conflicting or invalid sharding options, a pattern without its two fields, an
        unknown compression, ``index=True`` with compression, or a protected file in the way.
    FileExistsError
        An existing output of the same naming, without ``overwrite``.
    """

    def __init__(
        self,
        path: PathLike,
        prefix: Optional[str] = None,
        *,
        num_shards: Optional[int] = None,
        max_bytes_per_shard: Optional[int] = None,
        records_per_shard: Optional[int] = None,
        compression: Optional[str] = None,
        level: Optional[int] = None,
        suffix: str = ".tfrecord",
        index: bool = False,
        manifest: Union[bool, PathLike] = True,
        spec=None,
        overwrite: bool = False,
        sync: bool = True,
        protect: Iterable[PathLike] = (),
        storage_options=None,
        filesystem=None,
    ):
        self._store, where = _store_for(path, storage_options, filesystem)
        self._naming = _Naming.from_args(self._store, where, prefix, suffix)
        self._compression = normalize_compression(compression, auto=False)
        self._level = level
        self._num_shards = _positive("num_shards", num_shards)
        max_bytes = _positive("max_bytes_per_shard", max_bytes_per_shard)
        max_records = _positive("records_per_shard", records_per_shard)
        if self._num_shards is not None and (max_bytes, max_records) != (None, None):
            raise ValueError(
                "num_shards cannot be combined with max_bytes_per_shard or records_per_shard"
            )
        if self._num_shards is None and max_bytes is None and max_records is None:
            max_bytes = DEFAULT_SHARD_BYTES
        self._max_bytes = _UNLIMITED if max_bytes is None else max_bytes
        self._max_records = _UNLIMITED if max_records is None else max_records
        self._index = bool(index)
        if self._index and self._compression:
            raise ValueError(
                f"index=True needs uncompressed shards (compression is "
                f"{self._compression!r}): index files address uncompressed bytes"
            )
        self._spec = spec_to_json(spec)  # fails now, not after hours of writing
        if manifest is True:
            self._manifest: Optional[str] = self._naming.default_manifest()
        elif manifest is False or manifest is None:
            self._manifest = None
        else:
            self._manifest = self._manifest_path(manifest, storage_options, filesystem)
        self._overwrite = bool(overwrite)
        self._sync = bool(sync)
        self._check_protected(protect)
        if not self._overwrite:
            self._check_free()
        self._store.makedirs(self._naming.directory)

        self._token = secrets.token_hex(4)
        self._buffer_size = DEFAULT_BUFFER_SIZE
        if self._num_shards is not None:
            self._buffer_size = max(
                _MIN_BUFFER, min(DEFAULT_BUFFER_SIZE, _ROUND_ROBIN_BUFFERS // self._num_shards)
            )
        # Round robin: one slot per shard, opened on first use. Size cutting: appended in order.
        self._parts: List[Optional[_Shard]] = [None] * (self._num_shards or 0)
        self._records = 0
        self._bytes = 0
        self._error: Optional[BaseException] = None  # the failure of a write, if any
        self._state = "open"  # -> "closed" (shards final) or "aborted" (left as temporaries)
        self._shards: List[str] = []
        self._shard_bytes: List[int] = []
        # Shard 0 exists in every output: opening it now reports a bad level or an unwritable
        # directory here rather than at the first write.
        if self._num_shards is not None:
            self._parts[0] = self._open(0)
        else:
            self._current()

    # -- writing --

    def write(self, record) -> None:
        """Writes one record into the shard it belongs to.

        Parameters
        ----------
        record : bytes-like
            The payload.

        Raises
        ------
        ValueError
            The writer is closed.
        RuntimeError
            An earlier write failed.
        OSError
            The write failed (the output is then unfinished: see :attr:`partial_paths`).
        """
        self._check_writable()
        size = memoryview(record).nbytes + FRAMING_SIZE
        part = self._part_for(size)
        with self._failing():
            part.open_writer.write(record)
        self._count(part, size)

    def write_batch(self, records: Union[RecordBatch, Iterable]) -> None:
        """Writes many records, in order.

        Parameters
        ----------
        records : RecordBatch or iterable of bytes-like
            The records.

        Raises
        ------
        ValueError
            The writer is closed.
        RuntimeError
            An earlier write failed.
        OSError
            The write failed.
        """
        self._check_writable()
        if isinstance(records, RecordBatch):
            self._write_batch(records)
            return
        it = iter(records)
        while True:
            chunk = RecordBatch.from_records(islice(it, _ITERABLE_CHUNK))
            if not len(chunk):
                return
            self._write_batch(chunk)

    def write_example(self, features: Mapping[str, Any]) -> None:
        """Encodes ``features`` as one tf.train.Example and writes it.

        Parameters
        ----------
        features : mapping of str to values
            As for :func:`~tfrec_fast.encode_example`.

        Raises
        ------
        TypeError
            A value that cannot be encoded.
        ValueError
            A value that cannot be encoded.
        """
        self.write(encode_example(features))

    def write_examples(self, columns: Mapping[str, Any], n: Optional[int] = None) -> None:
        """Encodes columns as N Examples and writes them.

        Parameters
        ----------
        columns : mapping of str to column
            As for :func:`~tfrec_fast.encode_examples`.
        n : int, optional
            The number of Examples (default: from the columns).

        Raises
        ------
        TypeError
            Columns that cannot be encoded.
        ValueError
            Columns that cannot be encoded.
        """
        self.write_batch(encode_examples(columns, n))

    def _write_batch(self, batch: RecordBatch) -> None:
        sizes = np.diff(batch.offsets) + FRAMING_SIZE
        if self._num_shards is not None:
            # Record j of the batch goes to shard (first + j) % N: one write_batch per shard.
            n, first = self._num_shards, self._records % self._num_shards
            records = list(batch)
            for j in range(min(n, len(records))):
                part = self._round_robin_part((first + j) % n)
                with self._failing():
                    part.open_writer.write_batch(records[j::n])
                self._count(part, sizes[j::n])
            return
        # Size cutting, one write_batch per run of records that fits in the current shard.
        ends = np.cumsum(sizes)  # ends[j]: framed bytes of records 0..j
        rest = iter(batch)
        p = 0
        while p < len(batch):
            part = self._current()
            before = int(ends[p - 1]) if p else 0
            take = int(np.searchsorted(ends, before + self._max_bytes - part.bytes, "right")) - p
            take = max(0, min(take, self._max_records - part.records))
            if take == 0:
                if part.records:
                    self._finish_current()
                    continue
                take = 1  # larger than the limit on its own: a shard of its own
            with self._failing():
                # The whole batch as it is when it fits: the writer's fast path for a RecordBatch.
                part.open_writer.write_batch(batch if take == len(batch) else islice(rest, take))
            self._count(part, sizes[p : p + take])
            p += take

    def _part_for(self, size: int) -> _Shard:
        """The shard the next record (framed ``size`` bytes) goes to, opened if need be."""
        if self._num_shards is not None:
            return self._round_robin_part(self._records % self._num_shards)
        part = self._current()
        if part.records and (
            part.bytes + size > self._max_bytes or part.records >= self._max_records
        ):
            self._finish_current()
            part = self._current()
        return part

    def _round_robin_part(self, i: int) -> _Shard:
        part = self._parts[i]
        if part is None:
            self._parts[i] = part = self._open(i)
        return part

    def _current(self) -> _Shard:
        """Size cutting: the shard being filled, a new one if the last was finished."""
        last = self._parts[-1] if self._parts else None
        if last is None or last.writer is None:
            last = self._open(len(self._parts))
            self._parts.append(last)
        return last

    def _finish_current(self) -> None:
        part = self._current()
        with self._failing():
            part.close_writer()  # one open file at a time when cutting by size

    def _manifest_path(self, manifest, storage_options, filesystem) -> str:
        """A manifest path given by the caller, in the output's store."""
        location = resolve_beside(manifest, storage_options, filesystem)
        store, path = _Output(location.store), location.path
        if not store.same_store(self._store.store):
            raise ValueError(
                "the manifest must be in the same storage as the shards "
                "(both local, or both remote)"
            )
        return store.abspath(path)

    def _open(self, i: int) -> _Shard:
        temp = self._naming.temp(i, self._token)
        with self._failing():
            writer = self._store.writer(temp, self._compression, self._level, self._buffer_size)
        return _Shard(temp, writer)

    def _count(self, part: _Shard, sizes) -> None:
        """Counts records written to ``part``: ``sizes`` is one framed size or an array of them."""
        records, size = (1, sizes) if isinstance(sizes, int) else (len(sizes), int(sizes.sum()))
        part.records += records
        part.bytes += size
        self._records += records
        self._bytes += size
        if self._index:  # the index is made from these, not by reading the shard again
            if isinstance(sizes, int):
                part.sizes.append(sizes)
            else:
                part.sizes.frombytes(np.ascontiguousarray(sizes, dtype=np.int64).tobytes())

    @contextlib.contextmanager
    def _failing(self) -> Iterator[None]:
        """An exception while writing marks the output failed (it can no longer be finished)."""
        try:
            yield
        except BaseException as error:
            if self._error is None:
                self._error = error
            raise

    def _check_writable(self) -> None:
        if self._state != "open":
            raise ValueError("write to a closed ShardedWriter")
        if self._error is not None:
            raise RuntimeError(
                "an earlier write to this ShardedWriter failed; close it and "
                "see partial_paths for what was written"
            ) from self._error

    # -- finishing --

    def close(self) -> List[str]:
        """Finishes the output and returns the final shard paths (absolute, in order).

        Idempotent. After a failed write (or once left by an exception) it instead closes the
        temporary files (see :attr:`partial_paths`) and raises ``RuntimeError``.

        Returns
        -------
        list of str
            The final shard paths (URLs for remote output), in order.

        Raises
        ------
        RuntimeError
            The output failed earlier, or was abandoned by an exception.
        OSError
            Finishing a shard, an index or the manifest failed (nothing more is renamed).
        """
        if self._state == "closed":
            return self.shards
        if self._state == "aborted" or self._error is not None:
            self._abort()
            raise RuntimeError(
                "ShardedWriter not finished (a write failed, or it was left by "
                f"an exception); completed records are in {self.partial_paths}"
            ) from self._error
        try:
            self._close_writers(quiet=False)
            self._finish()
        except BaseException:
            if self._state != "closed":  # else only the clean-up after the output failed
                self._abort()
            raise
        return self.shards

    def _finish(self) -> None:
        parts: List[_Shard] = []
        for i, part in enumerate(self._parts):
            if part is None:  # round robin: every one of the N shards exists, empty ones too
                self._parts[i] = part = self._open(i)
                part.close_writer()
            parts.append(part)
        n = len(parts)  # size cutting with no records: shard 0, empty
        finals = [self._naming.final(i, n) for i in range(n)]
        if not self._overwrite:
            self._check_free()  # something may have appeared while we wrote
        store = self._store
        for part in parts:
            if self._sync:
                store.fsync_file(part.temp)
            if self._index:  # under a temporary name too, renamed with its shard
                sizes = np.frombuffer(part.sizes, dtype=np.int64)
                offsets = np.cumsum(sizes) - sizes
                store.write_index(part.temp + ".idx", offsets, sizes)
                if self._sync:
                    store.fsync_file(part.temp + ".idx")
        for part, final in zip(parts, finals):
            if self._index:
                store.replace(part.temp + ".idx", final + ".idx")
            store.replace(part.temp, final)
            part.final = final
        self._shard_bytes = [store.size(final) for final in finals]
        if self._manifest is not None:
            store.write_json(
                self._manifest, self._manifest_data(self._manifest, parts), self._token, self._sync
            )
        self._shards = finals
        self._state = "closed"  # the output is complete from here on
        if self._overwrite:
            self._remove_stale()
        if self._sync:
            store.fsync_directory(self._naming.directory)
            if (
                self._manifest is not None
                and store.dirname(self._manifest) != self._naming.directory
            ):
                store.fsync_directory(store.dirname(self._manifest))

    def _manifest_data(self, manifest: str, parts: List[_Shard]) -> Dict[str, Any]:
        return manifest_data(
            self._store,
            manifest,
            [(part.path, part.records, size) for part, size in zip(parts, self._shard_bytes)],
            self._compression,
            self._spec,
            self._index,
        )

    def _check_free(self) -> None:
        taken = self._naming.family()
        manifests = {self._naming.default_manifest(), self._manifest}
        for manifest in (m for m in manifests if m is not None):
            if self._store.exists(manifest):
                taken.append(manifest)
        if taken:
            raise FileExistsError(
                f"{self._store.url(taken[0])} already exists ({len(taken)} "
                "file(s) of this output); pass overwrite=True to replace them"
            )

    def _check_protected(self, protect: Iterable[PathLike]) -> None:
        """Refuses an output whose files could replace one of ``protect``."""
        outputs = self._naming.family() + [m for m in (self._manifest,) if m is not None]
        for keep in protect:
            for output in outputs:
                if self._store.same(keep, output):
                    raise ValueError(
                        f"{output} is the input {os.fspath(keep)}: writing this "
                        "output would replace it; choose another directory or "
                        "prefix"
                    )

    def _remove_stale(self) -> None:
        """Removes shards, indexes and a default manifest of an earlier output by this name."""
        keep = set(self._shards)
        if self._index:
            keep.update(path + ".idx" for path in self._shards)
        stale = [path for path in self._naming.family() if path not in keep]
        default = self._naming.default_manifest()
        if default != self._manifest and self._store.exists(default):
            stale.append(default)  # it would describe the old shards
        for path in stale:
            self._store.remove(path)

    def _close_writers(self, quiet: bool) -> None:
        """Closes every open shard writer (completing its records), even if one fails."""
        first_error = None
        for part in self._parts:
            if part is not None and part.writer is not None:
                try:
                    part.writer.close()
                except Exception as error:
                    first_error = first_error or error
                part.writer = None
        if first_error is not None and not quiet:
            raise first_error

    def _abort(self) -> None:
        """Leaves the output unfinished: files closed, under their temporary names."""
        self._close_writers(quiet=True)
        for part in self._parts:
            if part is not None and part.final is None:
                self._remove_quietly(part.temp + ".idx")  # if made: derived, not worth keeping
        self._state = "aborted"

    def _remove_quietly(self, path: str) -> None:
        try:
            self._store.remove(path)
        except OSError:
            pass

    def remove_partial(self) -> None:
        """Removes what an unfinished output left (:attr:`partial_paths`, and their indexes):
        for a run that will be started again, not resumed."""
        if self._state == "closed":
            return
        self._abort()
        for part in self._parts:
            if part is not None:
                self._remove_quietly(part.path)
                if self._index:
                    self._remove_quietly(part.path + ".idx")

    def __enter__(self) -> "ShardedWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self._abort()

    # -- state --

    @property
    def records_written(self) -> int:
        """Records written so far, over all shards."""
        return self._records

    @property
    def bytes_written(self) -> int:
        """Framed uncompressed bytes written so far (payload + 16 per record)."""
        return self._bytes

    @property
    def shards(self) -> List[str]:
        """The final shard paths (URLs for remote output), in order: empty until a successful
        :meth:`close`."""
        return [self._store.url(path) for path in self._shards]

    @property
    def shard_bytes(self) -> List[int]:
        """The stored size of each final shard (compressed, if it is), after :meth:`close`."""
        return list(self._shard_bytes) if self._state == "closed" else []

    @property
    def manifest_path(self) -> Optional[str]:
        """Where the manifest is (or will be) written; None with ``manifest=False``."""
        return None if self._manifest is None else self._store.url(self._manifest)

    @property
    def partial_paths(self) -> List[str]:
        """Where the shards written so far are, in shard order, while unfinished or after a
        failure: temporary files (or final names, for shards a failed close already renamed).
        Empty once the output is complete."""
        if self._state == "closed":
            return []
        return [self._store.url(part.path) for part in self._parts if part is not None]

    def __repr__(self) -> str:
        where = self._store.url(self._store.join(self._naming.directory, self._naming.pattern))
        return (
            f"<ShardedWriter {where!r} ({self._state}, {self._records} records, "
            f"{sum(p is not None for p in self._parts)} shards)>"
        )
