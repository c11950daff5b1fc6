"""A prepared TFDS dataset (:class:`Dataset`) and its splits (:class:`Split`).

A Split is a sequence of examples in TFDS's order: ``len()`` comes from dataset_info.json,
iteration streams the shards (reading records in batches, parsing each batch in one C++ call),
``split[i]`` and ``split.get_batch(indices)`` read through per-shard indexes made on first use
(see indexes.py). Nothing is opened until it is read; a Split pickles without open files, so
it works in DataLoader workers. The dataset may be local or in a store (a URL, with
``storage_options`` or ``filesystem``): every file goes through the storage layer (_files.py).
"""

from __future__ import annotations

import collections.abc
import copy
import errno
import os
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence

import numpy as np

from ..errors import ExampleParseError
from ..example import Ragged
from ..index import IndexedTFRecordReader
from ..records import ITER_BATCH_BYTES, RecordBatch
from ..storage import Location
from . import _files
from .decoder import NESTED, Decoder, skipped_paths
from .indexes import check_count, kept_index, shard_index
from .metadata import DatasetInfo, locate, read_info
from .spec import leaves
from .splits import BLOCK_LENGTH, CYCLE_LENGTH, FileInstruction, file_instructions, interleave_runs

__all__ = ["Dataset", "Split", "open"]

# Records parsed at a time while iterating (with at most ITER_BATCH_BYTES of them).
BATCH_RECORDS = 256


def _relocated(error: ExampleParseError, path: str, first: int) -> ExampleParseError:
    """A parse error counted from a batch's first record -> counted in the file."""
    index = error.record_index
    return ExampleParseError(
        error.detail,
        path=path,
        record_index=None if index is None else first + index,
        feature=error.feature,
    )


class _IndexedPart:
    """A shard's records from record ``first`` on, read through the shard's index: a stream
    entering a shard in the middle reads nothing before its first record. Reads as
    TFRecordReader does (read_batch, records_read, tell), records back to back in one read."""

    def __init__(self, location: Location, index, first: int, verify: bool):
        self.offsets, self.sizes = index
        self._reader: IndexedTFRecordReader = _files.open_indexed(location, index, verify=verify)
        self.records_read = first

    def read_batch(self, max_records: int, max_bytes: Optional[int]) -> RecordBatch:
        start = self.records_read
        end = min(len(self.offsets), start + max_records)
        if max_bytes is not None and end > start + 1:  # at least one record, as TFRecordReader
            ends = np.cumsum(self.sizes[start:end])
            end = start + max(1, int(np.searchsorted(ends, max_bytes, side="right")))
        batch = self._reader.get_batch(np.arange(start, end, dtype=np.int64))
        self.records_read = end
        return batch

    def tell(self) -> int:
        if self.records_read < len(self.offsets):
            return int(self.offsets[self.records_read])
        return int(self.offsets[-1] + self.sizes[-1]) if len(self.offsets) else 0

    def close(self) -> None:
        self._reader.close()


class _ShardStream:
    """Reads one file instruction's records in order, a parsed batch at a time. A part starting
    in the middle of a shard enters it through the shard's index when one was kept (see
    indexes.py): only its own records are read (of a store: fetched). Without one it reads the
    records before, as TFDS does. ``share``: shards read at once (a store's read-ahead memory
    is shared between them)."""

    def __init__(
        self,
        instruction: FileInstruction,
        decoder: Optional[Decoder],
        verify: bool,
        index_dir=None,
        beside: Optional[Location] = None,
        share: int = 1,
    ):
        self.instruction = instruction
        self.decoder = decoder  # None: hand out the serialized records
        self.verify = verify
        self.index_dir = index_dir
        self.beside = beside
        self.share = share
        self.reader: Any = None  # a TFRecordReader, or an _IndexedPart
        self.remaining = instruction.take
        self.rows: Any = None
        self.first = self.n = self.pos = 0

    def _open(self) -> Any:
        location, skip = self.instruction.location, self.instruction.skip
        if skip:
            index = kept_index(
                location,
                self.instruction.shard_length,
                index_dir=self.index_dir,
                beside=self.beside,
            )
            if index is not None:
                return _IndexedPart(location, index, skip, self.verify)
        reader = _files.open_records(location, verify=self.verify, share=self.share)
        while reader.records_read < skip:  # TFDS skips by reading too
            if not len(reader.read_batch(skip - reader.records_read, ITER_BATCH_BYTES)):
                self._too_few(reader)
        return reader

    def _too_few(self, reader: Any):
        check_count(
            self.instruction.path, self.instruction.shard_length, reader.records_read, reader.tell()
        )

    def _next_batch(self) -> None:
        if self.reader is None:
            self.reader = self._open()
        path = self.instruction.path
        batch = self.reader.read_batch(min(self.remaining, BATCH_RECORDS), ITER_BATCH_BYTES)
        if not len(batch):
            self._too_few(self.reader)
        self.first = self.reader.records_read - len(batch)
        self.remaining -= len(batch)
        self.n, self.pos = len(batch), 0
        if self.decoder is None:
            self.rows = batch.to_list()
            return
        try:
            self.rows = self.decoder.parse(batch, path)
        except ExampleParseError as error:
            raise _relocated(error, path, self.first) from None

    def take(self, count: int) -> list:
        """Up to ``count`` next examples (at least one)."""
        if self.pos == self.n:
            self._next_batch()
        end = min(self.n, self.pos + count)
        a, self.pos = self.pos, end
        if self.decoder is None:
            return self.rows[a:end]
        try:
            return self.decoder.examples(self.rows, self.n, a, end)
        except ExampleParseError as error:
            raise _relocated(error, self.instruction.path, self.first) from None

    @property
    def done(self) -> bool:
        return self.remaining == 0 and self.pos == self.n

    def finish(self) -> None:
        """After the last record: a shard read to its end must hold no more records than
        dataset_info.json says (TFDS would silently read them)."""
        reader, self.reader = self.reader, None
        if reader is None:
            return
        try:
            if self.instruction.to_end:
                offset = reader.tell()
                if len(reader.read_batch(1, None)):
                    check_count(
                        self.instruction.path,
                        self.instruction.shard_length,
                        self.instruction.shard_length + 1,
                        offset,
                    )
        finally:
            reader.close()

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
            self.reader = None


class Split:
    """Examples of a split (or slice of splits: "train[:10%]+test") in TFDS's order.

    - ``len(split)``: from dataset_info.json's shard lengths (no scan);
    - ``for example in split``: the examples ``tfds.as_numpy(builder.as_dataset(split,
      shuffle_files=False))`` gives, in its order: shards interleaved 16 records at a time, 16
      shards at a time (one after another when the dataset disables shuffling);
    - ``split[i]``, ``split[a:b]``, ``split.get_batch(indices)``: example i of that order,
      read through shard indexes (built on first use, kept beside the shards or in a cache);
    - ``split.records()``: the serialized Examples, in the same order.

    With ``serialized=True`` (what :meth:`Dataset.records` makes) the examples are the
    serialized Examples themselves (bytes), by iteration and by index alike, whatever the
    features: none is decoded, so none is refused.

    Damaged shards raise :class:`~tfrec_fast.DataLossError` and malformed records
    :class:`~tfrec_fast.ExampleParseError`, naming the shard and the record's index in it.
    """

    def __init__(
        self,
        info: DatasetInfo,
        split: Any,
        *,
        decode_images: bool = False,
        decoders: Optional[Mapping] = None,
        as_supervised: bool = False,
        shuffle_files: bool = False,
        read_config: Any = None,
        verify: bool = True,
        index_dir=None,
        nested: str = "steps",
        serialized: bool = False,
    ):
        if serialized and as_supervised:
            raise ValueError(
                "serialized Examples have no supervised structure: "
                "as_supervised=True is for decoded examples"
            )
        self.info = info
        self.name = split if isinstance(split, str) else repr(split)
        self._instructions = file_instructions(split, info.splits)
        if not self._instructions:  # as TFDS, which refuses to read nothing
            raise ValueError(
                f"split {self.name!r} of {info.name} selects no examples "
                "(TFDS: corresponds to no data)"
            )
        self._check_shards()
        paths = {leaf.path for leaf in leaves(info.features)}
        self._options: Dict[str, Any] = dict(
            decode_images=bool(decode_images),
            skip=frozenset(skipped_paths(decoders, paths)),
            nested=nested,
        )
        self._supervised = self._supervised_keys() if as_supervised else None
        self._shuffle_files = bool(shuffle_files)
        self._cycle: Any = getattr(read_config, "interleave_cycle_length", None)
        if not isinstance(self._cycle, int):  # TFDS's MISSING / None: the default
            self._cycle = 1 if info.disable_shuffling else CYCLE_LENGTH
        elif self._cycle < 1:  # tf.data.AUTOTUNE: an order that depends on TensorFlow's
            raise ValueError(
                "interleave_cycle_length must be a positive number (AUTOTUNE "
                "leaves the order to TensorFlow's view of the machine)"
            )
        self._block = getattr(read_config, "interleave_block_length", None) or BLOCK_LENGTH
        self._rng = np.random.default_rng(getattr(read_config, "shuffle_seed", None))
        self._verify = bool(verify)
        self._index_dir = index_dir
        self._length = sum(i.take for i in self._instructions)
        self._serialized = bool(serialized)
        self._decoder: Optional[Decoder] = (
            None if serialized else Decoder(info.features, **self._options)
        )
        self._order: Optional[tuple] = None
        self._readers: Dict[str, IndexedTFRecordReader] = {}

    # ---- set-up -----------------------------------------------------------------------------

    def _check_shards(self) -> None:
        """Every shard read must exist: a shard of a store is looked for in the directory's
        listing (no request), a local one on disk."""
        files = self.info.files
        for ins in self._instructions:
            location = ins.location
            if location.os_path is None and files is not None:
                if location.basename in files:
                    continue  # the listing found it
            elif location.exists():
                continue
            count = self.info.splits[ins.split].num_shards
            raise FileNotFoundError(
                errno.ENOENT,
                f"shard {ins.shard_index} of the {count} of split "
                f"{ins.split!r} that dataset_info.json lists is missing",
                ins.path,
            )

    def _beside(self, shard: Location) -> Optional[Location]:
        """``<shard>.idx`` of a shard of a store where there may be one: the listing's, or, where
        the store lists nothing, its name (tried when needed)."""
        if shard.os_path is not None:
            return None
        files = self.info.files
        if files is None:
            return shard.with_suffix(".idx")
        return files.get(shard.basename + ".idx")

    def _supervised_keys(self) -> tuple:
        keys = self.info.supervised_keys
        if not keys:
            raise ValueError(
                f"as_supervised=True but {self.info.name} does not support a "
                "supervised structure (dataset_info.json has no supervisedKeys)"
            )
        return keys

    @property
    def decoder(self) -> Optional[Decoder]:
        """What makes the examples (None: the examples are the serialized records)."""
        if self._decoder is None and not self._serialized:
            self._decoder = Decoder(self.info.features, **self._options)
        return self._decoder

    def _runs(self, order: Optional[np.ndarray] = None) -> np.ndarray:
        """Interleave runs [instruction, first, count] over the instructions (in ``order``)."""
        if order is None:
            order = np.arange(len(self._instructions))
        runs = interleave_runs(
            [self._instructions[k].take for k in order], self._cycle, self._block
        )
        runs[:, 0] = order[runs[:, 0]] if len(runs) else runs[:, 0]
        return runs

    def _positions(self):
        """(runs, each run's first position in the split), built once."""
        if self._order is None:
            runs = self._runs()
            starts = np.zeros(len(runs), dtype=np.int64)
            if len(runs):
                np.cumsum(runs[:-1, 2], out=starts[1:])
            self._order = (runs, starts)
        return self._order

    def __getstate__(self):
        state = self.__dict__.copy()
        state.update(_decoder=None, _readers={})
        return state

    def with_nested(self, nested: str) -> "Split":
        """The same split with its nested Datasets given another way.

        Parameters
        ----------
        nested : {"steps", "columns"}
            Lists of elements, or arrays stacked over the elements (see :func:`open`).

        Returns
        -------
        Split
            This split if it already gives them so, else a copy that does (the shards and
            indexes are shared, nothing is read).

        Raises
        ------
        ValueError
            An unknown ``nested``.
        UnknownFeatureError
            A feature that cannot be decoded in that form.
        """
        if nested not in NESTED:
            raise ValueError(f"nested must be one of {NESTED}, not {nested!r}")
        if self._options["nested"] == nested or self._serialized:
            return self
        made = copy.copy(self)
        made._options = dict(self._options, nested=nested)
        made._decoder = Decoder(self.info.features, **made._options)
        made._readers = {}
        return made

    # ---- sequence ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[Any]:
        return self._stream(self.decoder)

    def records(self) -> Iterator[bytes]:
        """The serialized tf.train.Examples, in the split's order."""
        return self._stream(None)

    def _stream(self, decoder: Optional[Decoder]) -> Iterator[Any]:
        if self._shuffle_files:  # a new shard order each time, as TFDS's reshuffle
            runs = self._runs(self._rng.permutation(len(self._instructions)))
        else:
            runs = self._positions()[0]
        streams: Dict[int, _ShardStream] = {}
        share = min(self._cycle, len(self._instructions))
        try:
            for k, _, count in runs.tolist():
                stream = streams.get(k)
                if stream is None:
                    ins = self._instructions[k]
                    stream = streams[k] = _ShardStream(
                        ins,
                        decoder,
                        self._verify,
                        self._index_dir,
                        self._beside(ins.location),
                        share,
                    )
                while count:
                    rows = stream.take(count)
                    count -= len(rows)
                    yield from (self._shaped(rows) if decoder is not None else rows)
                if stream.done:
                    del streams[k]
                    stream.finish()
        finally:
            for stream in streams.values():
                stream.close()

    def _shaped(self, examples: list) -> list:
        if self._supervised is None:
            return examples
        return [_select(example, self._supervised) for example in examples]

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self.get_batch(range(*i.indices(len(self))))
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"split indices are integers or slices, not {type(i).__name__}")
        return self.get_batch([int(i)])[0]

    def get_batch(self, indices: Sequence[int]) -> list:
        """The examples at ``indices`` (any order, repeats allowed), one read and one parse
        per shard."""
        idx = np.asarray(indices)
        if idx.size == 0:
            return []
        if idx.dtype.kind not in "iu" or idx.ndim != 1:
            raise TypeError("indices must be a one-dimensional sequence of integers")
        n = len(self)
        idx = idx.astype(np.int64)
        if idx.min() < -n or idx.max() >= n:
            bad = int(idx[(idx < -n) | (idx >= n)][0])
            raise IndexError(f"index {bad} out of range for split {self.name!r} of {n} examples")
        idx = np.where(idx < 0, idx + n, idx)
        runs, starts = self._positions()
        r = np.searchsorted(starts, idx, side="right") - 1
        which = runs[r, 0]
        out: list = [None] * len(idx)
        for k in np.unique(which).tolist():
            where = np.flatnonzero(which == k)
            ins = self._instructions[k]
            records = ins.skip + runs[r[where], 1] + (idx[where] - starts[r[where]])
            for j, example in zip(where.tolist(), self._read(ins, records)):
                out[j] = example
        return self._shaped(out)

    def _read(self, ins: FileInstruction, records: np.ndarray) -> list:
        reader = self._readers.get(ins.path)
        if reader is None:
            index = shard_index(
                ins.location,
                ins.shard_length,
                index_dir=self._index_dir,
                beside=self._beside(ins.location),
            )
            reader = self._readers[ins.path] = _files.open_indexed(
                ins.location, index, verify=self._verify
            )
        batch = reader.get_batch(records)
        decoder = self.decoder
        if decoder is None:
            return batch.to_list()
        try:
            columns = decoder.parse(batch, ins.path)
            return decoder.examples(columns, len(batch))
        except ExampleParseError as error:
            index = error.record_index
            raise ExampleParseError(
                error.detail,
                path=ins.path,
                record_index=None if index is None else int(records[index]),
                feature=error.feature,
            ) from None

    def batches(self, batch_size: int) -> "Batched":
        """The examples stacked ``batch_size`` at a time (as tf.data's batch: the last batch
        may be smaller; -1 is the whole split at once)."""
        return Batched(self, batch_size)

    def to_torch(self, transform: Optional[Any] = None) -> Any:
        """A map-style torch dataset of this split (tfrec_fast.tfds.torch.SplitDataset)."""
        from .torch import SplitDataset

        return SplitDataset(self, transform)

    def to_torch_steps(self, **kwargs: Any) -> Any:
        """An iterable torch dataset of the steps of this split's episodes (RLDS), one by one
        or in windows (tfrec_fast.tfds.torch.StepsDataset, which takes ``kwargs``)."""
        from .torch import StepsDataset

        return StepsDataset(self, **kwargs)

    def close(self) -> None:
        """Closes the shards opened for random access (iterators close theirs themselves)."""
        for reader in self._readers.values():
            reader.close()
        self._readers = {}

    def __repr__(self) -> str:
        return (
            f"<Split {self.info.name} {self.name!r}: {len(self)} examples in "
            f"{len({i.path for i in self._instructions})} shards>"
        )


def _select(example: Mapping, keys: Any) -> Any:
    """An example's supervised structure: ("image", "label") -> (image, label)."""
    if isinstance(keys, str):
        value: Any = example
        for part in keys.split("/"):
            value = value[part]
        return value
    if isinstance(keys, Mapping):
        return {k: _select(example, v) for k, v in keys.items()}
    return tuple(_select(example, k) for k in keys)


class Batched:
    """Examples in batches, as TFDS's ``batch_size`` makes them (``padded_batch``): each leaf an
    array with a leading batch dimension, values of different shapes zero-padded (``b""`` for
    strings) to the largest of the batch; bytes in an object array. The last batch may be
    smaller. Ragged values (two Sequences deep) cannot be batched, as in TensorFlow."""

    def __init__(self, split: Split, batch_size: int):
        if batch_size != -1 and batch_size < 1:
            raise ValueError("batch_size is positive, or -1 for the whole split")
        self.split = split
        self.batch_size = len(split) if batch_size == -1 else int(batch_size)

    def __len__(self) -> int:
        size = max(self.batch_size, 1)  # batch_size=-1 of an empty split: 0
        return (len(self.split) + size - 1) // size

    def __iter__(self) -> Iterator[Any]:
        pending: list = []
        for example in self.split:
            pending.append(example)
            if len(pending) == self.batch_size:
                yield _stack(pending)
                pending = []
        if pending:
            yield _stack(pending)


def _stack(values: list) -> Any:
    first = values[0]
    if isinstance(first, list):
        raise TypeError(
            "nested Datasets (lists of elements) cannot be batched, as TensorFlow "
            "cannot batch nested tf.data.Datasets: open with nested='columns' to "
            "read them as arrays, which batch as Sequences do"
        )
    if isinstance(first, Mapping):
        return {k: _stack([v[k] for v in values]) for k in first}
    if isinstance(first, tuple):
        return tuple(_stack([v[i] for v in values]) for i in range(len(first)))
    if isinstance(first, Ragged):
        raise TypeError(
            "ragged values (features under two Sequences) cannot be batched, as "
            "TensorFlow's padded_batch cannot batch them"
        )
    if isinstance(first, bytes):
        values = [np.array(v, dtype=object) for v in values]
    arrays = [np.asarray(v) for v in values]
    shape = tuple(max(dims) for dims in zip(*(a.shape for a in arrays)))
    out = np.full(
        (len(arrays),) + shape, b"" if arrays[0].dtype == object else 0, dtype=arrays[0].dtype
    )
    for i, a in enumerate(arrays):
        out[(i,) + tuple(slice(0, d) for d in a.shape)] = a
    return out


class Dataset:
    """A prepared TFDS dataset: ``.info`` (:class:`DatasetInfo`), ``.splits`` (name ->
    :class:`Split`) and ``dataset["train[:10%]"]`` for any split string.

    ``directory`` is the prepared version directory (a path, a URL with ``storage_options``, a
    path on ``filesystem``, or a :class:`~tfrec_fast.storage.Location`); :func:`open` also
    finds it from a data dir and a name. The other arguments are :func:`open`'s.
    """

    def __init__(
        self,
        directory,
        *,
        decode_images: bool = False,
        verify: bool = True,
        index_dir=None,
        nested: str = "steps",
        storage_options=None,
        filesystem=None,
    ):
        if nested not in NESTED:
            raise ValueError(f"nested must be one of {NESTED}, not {nested!r}")
        location = _files.directory(
            directory, _with_index_cache(storage_options, index_dir), filesystem
        )
        self.info = read_info(location)
        self._defaults: Dict[str, Any] = dict(
            decode_images=decode_images, verify=verify, index_dir=index_dir, nested=nested
        )
        self._splits: Dict[str, Split] = {}

    @property
    def data_dir(self) -> str:
        """The prepared directory: its path, or its URL."""
        return self.info.data_dir

    @property
    def splits(self) -> Mapping[str, Split]:
        """Split name -> :class:`Split` (each opened when looked up)."""
        return _Splits(self)

    def __getitem__(self, split) -> Split:
        key = split if isinstance(split, str) else None
        if key is not None and key in self._splits:
            return self._splits[key]
        made = Split(self.info, split, **self._defaults)
        if key is not None:
            self._splits[key] = made
        return made

    def as_dataset(
        self,
        split=None,
        *,
        decoders: Optional[Mapping] = None,
        as_supervised: bool = False,
        shuffle_files: bool = False,
        read_config: Any = None,
        batch_size: Optional[int] = None,
        nested: Optional[str] = None,
    ):
        """TFDS's ``builder.as_dataset``: the examples of ``split``, as
        ``tfds.as_numpy(builder.as_dataset(...))`` gives them.

        Parameters
        ----------
        split : str, ReadInstruction, list of them, or None
            A TFDS split string ("train[:10%]+test"), or a list of them (a list of Splits
            back); None: every split (a dict by name).
        decoders : dict, optional
            ``{feature: SkipDecoding()}``, nested as the features (or joined with "/"): those
            features in their stored form (encoded images, raw Example values).
        as_supervised : bool
            Examples as the dataset's ``supervised_keys`` tuple, e.g. ``(image, label)``.
        shuffle_files : bool
            A new order of the shards each iteration (seeded by ``read_config.shuffle_seed``).
        read_config : ReadConfig, optional
            Ours or TFDS's: ``interleave_cycle_length``, ``interleave_block_length`` (the
            order), ``shuffle_seed``.
        batch_size : int, optional
            Batches of this many examples (-1: the whole split), padded as TFDS pads them.
        nested : {"steps", "columns"}, optional
            Overrides the dataset's form of nested Datasets (see :func:`open`).

        Returns
        -------
        Split or Batched, or a dict or list of them

        Raises
        ------
        ValueError
            A malformed split string, an unknown split, a slice selecting nothing, or
            ``as_supervised`` without supervised keys.
        FileNotFoundError
            A shard the split reads is missing.
        UnknownFeatureError
            A feature that cannot be decoded as asked (before anything is read).
        KeyError, TypeError
            ``decoders`` naming no feature, or holding something else than SkipDecoding.
        """
        kwargs = dict(
            decoders=decoders,
            as_supervised=as_supervised,
            shuffle_files=shuffle_files,
            read_config=read_config,
        )
        if split is None:
            return {
                name: self.as_dataset(name, batch_size=batch_size, nested=nested, **kwargs)
                for name in self.info.splits
            }
        if isinstance(split, (list, tuple)):
            return [
                self.as_dataset(s, batch_size=batch_size, nested=nested, **kwargs) for s in split
            ]
        options = dict(self._defaults, **({} if nested is None else {"nested": nested}))
        made = Split(self.info, split, **kwargs, **options)
        return made if batch_size is None else made.batches(batch_size)

    def records(self, split) -> Split:
        """The serialized tf.train.Examples of ``split``, in TFDS's order, whatever the
        features hold (none is decoded, so none is refused): iterate it, or index it
        (``records("train")[7]``), as a Split of bytes.

        Parameters
        ----------
        split : str or ReadInstruction
            A TFDS split string ("train[:10%]+test").

        Returns
        -------
        Split
            Its examples are bytes.

        Raises
        ------
        ValueError
            A malformed split string, an unknown split, or a slice selecting nothing.
        FileNotFoundError
            A shard it reads is missing.
        """
        options = {k: v for k, v in self._defaults.items() if k in ("verify", "index_dir")}
        return Split(self.info, split, serialized=True, **options)

    def download_and_prepare(self, *args, **kwargs) -> None:
        """Nothing to do: the dataset is prepared (TFDS builders call this first)."""

    def __repr__(self) -> str:
        return f"<Dataset {self.info.full_name} at {self.info.data_dir_name}>"


def _with_index_cache(storage_options, index_dir):
    """storage_options that keep the indexes of a store's shards in ``index_dir`` (the storage
    layer's index cache), unless they say where themselves."""
    if index_dir is None or (storage_options and "index_cache" in storage_options):
        return storage_options
    return {**(storage_options or {}), "index_cache": os.path.expanduser(os.fspath(index_dir))}


class _Splits(collections.abc.Mapping):
    def __init__(self, dataset: Dataset):
        self._dataset = dataset

    def __getitem__(self, name: str) -> Split:
        if name not in self._dataset.info.splits:
            raise KeyError(f"no split {name!r}: the splits are {list(self._dataset.info.splits)}")
        return self._dataset[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dataset.info.splits)

    def __len__(self) -> int:
        return len(self._dataset.info.splits)

    def __repr__(self) -> str:
        return repr({name: info for name, info in self._dataset.info.splits.items()})


def open(
    path,
    *,
    name: Optional[str] = None,
    data_dir=None,
    decode_images: bool = False,
    verify: bool = True,
    index_dir=None,
    nested: str = "steps",
    storage_options=None,
    filesystem=None,
) -> Dataset:
    """Opens a dataset prepared by TensorFlow Datasets (``tfds build``), without TensorFlow.

    Parameters
    ----------
    path : str, os.PathLike or Location
        The prepared directory (``~/tensorflow_datasets/mnist/3.0.1``), a dataset (or config)
        directory holding version directories (the newest is taken), or TFDS's data dir with
        ``name``; or, as TFDS users write it, the dataset's name, with ``data_dir``:
        ``open("mnist", data_dir="~/tensorflow_datasets")``. Local, or a URL of any fsspec
        protocol (``gs://bucket/tensorflow_datasets/mnist/3.0.1``, ``s3://...``).
    name : str, optional
        ``"mnist"``, ``"mnist:3.0.1"``, ``"wmt14_translate/de-en"``: the dataset under ``path``.
    data_dir : str, os.PathLike or Location, optional
        TFDS's data dir; ``path`` is then the name.
    decode_images : bool
        Image and Video features as decoded pixels (Pillow, simplejpeg) instead of the encoded
        bytes.
    verify : bool
        Check the records' CRCs.
    index_dir : str or os.PathLike, optional
        Where shard indexes are kept (default: beside local shards, or a cache directory when
        they are read-only; for a store, the index cache of the storage layer).
    nested : {"steps", "columns"}
        How a nested ``tfds.features.Dataset`` (RLDS's ``steps``) is given: ``"steps"`` a list
        of its elements (step dicts), as ``tfds.as_numpy`` iterates the nested dataset;
        ``"columns"`` a dict of arrays stacked over the elements (leading dimension: the number
        of steps), as a Sequence is given.
    storage_options : dict, optional
        For a URL: options of its fsspec filesystem (credentials, ``endpoint_url``, ...) and
        tfrec_fast's storage settings (``retries``, ``read_ahead``, ``concurrency``,
        ``index_cache``, ...; see :mod:`tfrec_fast.storage`).
    filesystem : fsspec or pyarrow filesystem, optional
        The filesystem ``path`` is on (instead of a URL's).

    Returns
    -------
    Dataset

    Raises
    ------
    FileNotFoundError
        No prepared dataset there, or its features.json is missing.
    DatasetInfoError
        dataset_info.json or features.json is malformed or describes what is not read here.
    ValueError
        An unknown ``nested``, or storage_options for a local path.
    TypeError
        The name given both as ``path`` (with ``data_dir``) and as ``name``.
    ImportError
        A URL without fsspec or its protocol's package (gcsfs, s3fs, ...).
    """
    if data_dir is not None:  # open("mnist", data_dir=...): path is the name
        if name is not None:
            raise TypeError(
                "open() takes the dataset's name as path or as name=, not both with data_dir="
            )
        path, name = data_dir, os.fsdecode(os.fspath(path))
    root = _files.directory(path, _with_index_cache(storage_options, index_dir), filesystem)
    return Dataset(
        locate(root, name),
        decode_images=decode_images,
        verify=verify,
        index_dir=index_dir,
        nested=nested,
    )
