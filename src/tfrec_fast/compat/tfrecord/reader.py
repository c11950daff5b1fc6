"""The ``tfrecord`` package's ``tfrecord.reader``: same names, arguments and values.

``from tfrecord.reader import example_loader`` becomes
``from tfrec_fast.compat.tfrecord.reader import example_loader``. Values are the package's:
``int`` -> int64 array, ``float`` -> float32 array, ``byte`` -> ``bytes`` for one value, else an
``|S`` array; a described key a record lacks is ``KeyError``, a described type that is not the
record's is ``TypeError``. What is different (on purpose):

- Both CRCs of every record are checked: damage raises :class:`~tfrec_fast.DataLossError`
  (the package raises RuntimeError on truncation and never checks CRCs).
- Records never alias each other: ``list(tfrecord_iterator(...))`` holds distinct records (the
  package yields views of one reused buffer).
- ``shard=(index, count)`` is honoured without an index file too (the index is then built in
  memory; the package ignores ``shard`` without one and every worker reads everything).
- With an index and no shard, reading starts at record 0 (the package starts at a random record
  and wraps around).
- gzip and zlib input are read (``compression_type="gzip" | "zlib"``); Examples are parsed in
  C++ a batch at a time.
"""

from __future__ import annotations

import functools
from typing import Dict, Iterator, List, Optional, Tuple, Union

import numpy as np

from ... import _loader
from ..._core import Kind
from ...columns import BytesColumn
from ...errors import ExampleParseError
from ...example import feature_kinds, parse_examples
from ...records import RecordBatch, normalize_compression
from ...spec import _BYTES, _FLOAT, _INT64, _KIND_DTYPE, VarLen
from . import iterator_utils

__all__ = [
    "tfrecord_iterator",
    "example_loader",
    "sequence_loader",
    "tfrecord_loader",
    "multi_tfrecord_loader",
    "process_feature",
]

Description = Union[List[str], Dict[str, str], None]
_TYPENAMES = {"byte": _BYTES, "float": _FLOAT, "int": _INT64}
_NAMES: Dict[Optional[Kind], str] = {_BYTES: "byte", _FLOAT: "float", _INT64: "int"}


def _batches(data_path, index_path, shard, compression_type) -> Iterator[RecordBatch]:
    compression = normalize_compression(compression_type)
    if shard is None:
        return _loader.read_range(data_path, compression=compression)
    shard_index, shard_count = (int(x) for x in shard)
    if shard_count < 1 or not 0 <= shard_index < shard_count:
        raise ValueError(f"bad shard {shard!r}: want (index, count) with 0 <= index < count")
    offsets, n = _loader.file_index(data_path, index_path, compression)
    start, stop = n * shard_index // shard_count, n * (shard_index + 1) // shard_count
    return _loader.read_range(data_path, start, stop, offsets=offsets, compression=compression)


def tfrecord_iterator(
    data_path: str,
    index_path: Optional[str] = None,
    shard: Optional[Tuple[int, int]] = None,
    compression_type: Optional[str] = None,
) -> Iterator[memoryview]:
    """Yields each record of the file as a read-only memoryview of its own (CRC-checked) bytes.

    ``shard=(i, n)`` yields the i-th of n contiguous, equal-sized record ranges (record counts
    differ by at most one), using ``index_path`` (the package's or DALI's index format) or an
    in-memory index.
    """
    for batch in _batches(data_path, index_path, shard, compression_type):
        yield from batch


def _kinds_of(description: Description) -> Optional[Dict[str, Optional[Kind]]]:
    """{key: wanted kind or None (any)} of a description; None: every key of each record."""
    if not description:
        return None
    if isinstance(description, (list, tuple)):
        return {str(k): None for k in description}
    kinds: Dict[str, Optional[Kind]] = {}
    for key, typename in description.items():
        if typename is not None and typename not in _TYPENAMES:
            raise ValueError(f"feature {key!r}: type {typename!r} is not 'byte', 'float' or 'int'")
        kinds[key] = None if typename is None else _TYPENAMES[typename]
    return kinds


def _value(column, i):
    """Record i's value the package's way."""
    if isinstance(column, BytesColumn):
        values = [bytes(v) for v in column[i]]
        return values[0] if len(values) == 1 else np.array(values, dtype=bytes)
    return np.array(column[i])  # int64 / float32, a fresh array as the package gives


def _record_keys(batch: RecordBatch, i: int, name: str) -> Dict[str, Optional[Kind]]:
    return feature_kinds(RecordBatch.from_records([batch[i]]), name)


def example_loader(
    data_path: str,
    index_path: Optional[str],
    description: Description = None,
    shard: Optional[Tuple[int, int]] = None,
    compression_type: Optional[str] = None,
) -> Iterator[Dict[str, object]]:
    """Yields each tf.train.Example as {key: value}: int -> int64 array, float -> float32 array,
    byte -> ``bytes`` (one value) or an ``|S`` array; the keys in ``description`` (a list of
    names or {name: "byte" | "float" | "int"}, types checked), every key of each record when
    None. A record that lacks a described key (KeyError) or holds another type (TypeError)
    raises after the records before it."""
    wanted = _kinds_of(description)
    name = str(data_path)
    for batch in _batches(data_path, index_path, shard, compression_type):
        yield from _examples(batch, wanted, name)


def _examples(batch: RecordBatch, wanted, name: str) -> Iterator[Dict[str, object]]:
    union = feature_kinds(batch, name)
    keys = wanted if wanted is not None else {k: None for k in union}
    spec = {}
    for key, want in keys.items():
        if key not in union:
            if wanted is not None:  # named, and in no record of the batch: the first one fails
                raise _package_error(batch, 0, key, want, name)
            continue
        found = union[key]
        kind = want if want is not None else found if found is not None else _FLOAT
        # Described keys are required in every record (the package's KeyError).
        spec[key] = VarLen(_KIND_DTYPE[kind], default=None if wanted is not None else [])
    try:
        columns = parse_examples(batch, spec, name=name)
    except ExampleParseError as error:
        bad = error.record_index
        if error.feature is None or bad is None:
            raise
        if bad:  # the records before the bad one come first, as the package gives them
            yield from _examples(RecordBatch.from_records(list(batch)[:bad]), wanted, name)
        raise _package_error(batch, bad, error.feature, spec[error.feature].kind, name) from None
    if wanted is None and len(batch) > 1:
        yield from _rows_with_own_keys(batch, columns, name)
        return
    names = list(columns)
    for i in range(len(batch)):
        yield {k: _value(columns[k], i) for k in names}


def _package_error(batch: RecordBatch, i: int, key: str, want: Optional[Kind], name: str):
    """The package's exception for record i and a described key: KeyError when the record lacks
    it, TypeError when it holds another kind of list."""
    keys = _record_keys(batch, i, name)
    if key not in keys:
        return KeyError(f"Key {key} doesn't exist (select from {list(keys)})!")
    have = keys[key]
    return TypeError(
        f"Incompatible type '{_NAMES.get(want)}' for `{key}` (should be '{_NAMES.get(have)}')."
    )


def _rows_with_own_keys(batch: RecordBatch, columns, name: str) -> Iterator[Dict[str, object]]:
    """Without a description each record gives its own keys (as the package does)."""
    union = list(columns)
    for i in range(len(batch)):
        keys = _record_keys(batch, i, name) if _maybe_missing(columns, i) else union
        yield {k: _value(columns[k], i) for k in union if k in keys}


def _maybe_missing(columns, i) -> bool:
    """Whether some feature has no value in record i (then it may be absent there)."""
    for col in columns.values():
        if isinstance(col, BytesColumn):
            if col.row_splits is not None and col.row_splits[i] == col.row_splits[i + 1]:
                return True
        elif col.row_splits[i] == col.row_splits[i + 1]:
            return True
    return False


def process_feature(feature, typename: Optional[str], typename_mapping: dict, key: str):
    """One protobuf Feature's value the package's way (its ``reader.process_feature``): checks
    ``typename`` (through ``typename_mapping``, e.g. {"int": "int64_list"}) against the list the
    Feature holds (TypeError if they differ)."""
    inferred = feature.WhichOneof("kind")
    value = list(getattr(feature, inferred).value) if inferred else []
    if typename is not None and typename_mapping[typename] != inferred:
        reverse = {v: k for k, v in typename_mapping.items()}
        raise TypeError(
            f"Incompatible type '{typename}' for `{key}` "
            f"(should be '{reverse.get(inferred, inferred)}')."
        )
    if inferred == "float_list":
        return np.array(value, dtype=np.float32)
    if inferred == "int64_list":
        return np.array(value, dtype=np.int64)
    return value[0] if len(value) == 1 else np.array(value, dtype=bytes)


def _np_values(values: list):
    if values and isinstance(values[0], bytes):
        return values[0] if len(values) == 1 else np.array(values, dtype=bytes)
    if values and isinstance(values[0], int):
        return np.array(values, dtype=np.int64)
    return np.array(values, dtype=np.float32)


def sequence_loader(
    data_path: str,
    index_path: Optional[str],
    context_description: Description = None,
    features_description: Description = None,
    shard: Optional[Tuple[int, int]] = None,
    compression_type: Optional[str] = None,
):
    """Yields (context, features) per tf.train.SequenceExample, as the package does: context
    values as in :func:`example_loader`, each feature list as a list of per-step values.
    (Decoded with protobuf, record by record: correct, not fast.)"""
    from ...proto import sequence_example_to_dict

    def pick(d, description):
        keys = list(d) if not description else list(description)
        missing = [k for k in keys if k not in d]
        if missing:
            raise KeyError(f"Key {missing[0]} doesn't exist (select from {list(d)})!")
        return keys

    for record in tfrecord_iterator(data_path, index_path, shard, compression_type):
        context, lists = sequence_example_to_dict(record)
        yield (
            {k: _np_values(context[k]) for k in pick(context, context_description)},
            {k: [_np_values(step) for step in lists[k]] for k in pick(lists, features_description)},
        )


def tfrecord_loader(
    data_path: str,
    index_path: Optional[str],
    description: Description = None,
    shard: Optional[Tuple[int, int]] = None,
    sequence_description: Description = None,
    compression_type: Optional[str] = None,
):
    """:func:`example_loader`, or :func:`sequence_loader` when ``sequence_description`` is given
    (an empty one meaning every feature list)."""
    if sequence_description is not None:
        return sequence_loader(
            data_path, index_path, description, sequence_description, shard, compression_type
        )
    return example_loader(data_path, index_path, description, shard, compression_type)


def multi_tfrecord_loader(
    data_pattern: str,
    index_pattern: Optional[str],
    splits: Dict[str, float],
    description: Description = None,
    sequence_description: Description = None,
    compression_type: Optional[str] = None,
    infinite: bool = True,
    shard: Optional[Tuple[int, int]] = None,
):
    """Records of several files (``data_pattern.format(split)``), each drawn from split s with
    probability splits[s] / sum(splits); see :func:`iterator_utils.sample_iterators`."""
    return mixed_loader(
        data_pattern,
        index_pattern,
        splits,
        description,
        sequence_description,
        compression_type,
        infinite,
        shard,
        np.random,
    )


def mixed_loader(
    data_pattern,
    index_pattern,
    splits,
    description,
    sequence_description,
    compression_type,
    infinite,
    shard,
    rng,
):
    """:func:`multi_tfrecord_loader` drawing from ``rng`` (``np.random`` or a RandomState)."""
    loaders = [
        functools.partial(
            tfrecord_loader,
            data_path=data_pattern.format(split),
            index_path=(index_pattern.format(split) if index_pattern is not None else None),
            description=description,
            sequence_description=sequence_description,
            compression_type=compression_type,
            shard=shard,
        )
        for split in splits
    ]
    return iterator_utils.sampled(loaders, list(splits.values()), infinite, rng)
