"""Drop-in replacements for the ``tfrecord`` package's ``tfrecord.reader`` functions.

Same names, parameters and value conventions as ``tfrecord.reader`` (vahidk/tfrecord), so
``from tfrecord.reader import tfrecord_loader`` becomes ``from tfrec_fast.reader import
tfrecord_loader``. What is different:

- Both CRCs of every record are checked: damage raises :class:`~tfrec_fast.DataLossError`
  (the tfrecord package raises RuntimeError on truncation and never checks CRCs).
- Records never alias each other: ``list(tfrecord_iterator(...))`` holds distinct records (the
  tfrecord package yields views of one reused buffer).
- ``shard=(index, count)`` is honoured without an index file too (the index is then built in
  memory; the tfrecord package ignores ``shard`` without one and every worker reads everything).
- With an index and no shard, reading starts at record 0 (the tfrecord package starts at a
  random record and wraps around).
- ``description=None`` decodes the features the file's first record holds; a feature missing
  from a later record comes back empty (the tfrecord package raises KeyError).
- Parsing is done in C++ for a batch of records at a time; gzip and zlib input is accepted.
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Tuple, Union

import numpy as np

from . import _loader
from .example import BytesColumn, Ragged, normalize_spec, parse_examples
from .records import TFRecordReader, normalize_compression

__all__ = ["tfrecord_iterator", "example_loader", "sequence_loader", "tfrecord_loader"]

Description = Union[List[str], Dict[str, str], None]


def _batches(data_path, index_path, shard, compression_type):
    compression = normalize_compression(compression_type)
    if shard is None:
        return _loader.read_range(data_path, compression=compression)
    shard_index, shard_count = (int(x) for x in shard)
    if shard_count < 1 or not 0 <= shard_index < shard_count:
        raise ValueError(f"bad shard {shard!r}: want (index, count) with 0 <= index < count")
    offsets, n = _loader.file_index(data_path, index_path, compression)
    start, stop = n * shard_index // shard_count, n * (shard_index + 1) // shard_count
    return _loader.read_range(data_path, start, stop, offsets=offsets, compression=compression)


def tfrecord_iterator(data_path: str, index_path: Optional[str] = None,
                      shard: Optional[Tuple[int, int]] = None,
                      compression_type: Optional[str] = None) -> Iterator[memoryview]:
    """Yields each record of the file as a read-only memoryview of its own (CRC-checked) bytes.

    ``shard=(i, n)`` yields the i-th of n contiguous, equal-sized record ranges (record counts
    differ by at most one), using ``index_path`` (the tfrecord package's or DALI's index format)
    or an in-memory index.
    """
    for batch in _batches(data_path, index_path, shard, compression_type):
        yield from batch


def _first_keys(data_path, compression_type) -> List[str]:
    from .proto import example_to_dict
    with TFRecordReader(data_path, normalize_compression(compression_type)) as reader:
        for record in reader:
            return list(example_to_dict(record))
    return []


def _value(column, i):
    if isinstance(column, np.ndarray):
        return column[i]
    if isinstance(column, Ragged):
        return column[i]
    return column  # BytesColumn handled by the caller


def _bytes_value(values: list):
    """The tfrecord package's convention: one value -> bytes, else an array of bytes."""
    if len(values) == 1:
        return values[0]
    return np.array(values, dtype=bytes)


def example_loader(data_path: str, index_path: Optional[str], description: Description = None,
                   shard: Optional[Tuple[int, int]] = None,
                   compression_type: Optional[str] = None) -> Iterator[Dict[str, object]]:
    """Yields each tf.train.Example as {name: value}: int -> int64 array, float -> float32 array,
    bytes -> ``bytes`` (one value) or an array of bytes; only the features in ``description``
    (a list of names or {name: "byte" | "float" | "int"}), all of the first record's when None.
    """
    if not description:
        description = _first_keys(data_path, compression_type)
        if not description:
            yield from ({} for _ in tfrecord_iterator(data_path, index_path, shard,
                                                      compression_type))
            return
    spec = normalize_spec(description)
    for batch in _batches(data_path, index_path, shard, compression_type):
        columns = parse_examples(batch, spec, name=str(data_path))
        per_feature = []
        for column in columns.values():
            if isinstance(column, BytesColumn):
                rows = column.to_list()
                per_feature.append([_bytes_value(r) if isinstance(r, list) else r
                                    for r in rows])
            else:
                per_feature.append([_value(column, i) for i in range(len(batch))])
        names = list(columns)
        for values in zip(*per_feature):
            yield dict(zip(names, values))


def _np_values(values: list):
    if values and isinstance(values[0], bytes):
        return _bytes_value(values)
    if values and isinstance(values[0], int):
        return np.array(values, dtype=np.int64)
    return np.array(values, dtype=np.float32)


def sequence_loader(data_path: str, index_path: Optional[str],
                    context_description: Description = None,
                    features_description: Description = None,
                    shard: Optional[Tuple[int, int]] = None,
                    compression_type: Optional[str] = None):
    """Yields (context, features) per tf.train.SequenceExample, as the tfrecord package does:
    context values as in :func:`example_loader`, each feature list as a list of per-step values.
    (Decoded with protobuf, record by record: correct, not fast.)"""
    from .proto import sequence_example_to_dict

    def pick(d, description):
        keys = list(d) if not description else list(description)
        missing = [k for k in keys if k not in d]
        if missing:
            raise KeyError(f"Key {missing[0]} doesn't exist (select from {list(d)})!")
        return keys

    for record in tfrecord_iterator(data_path, index_path, shard, compression_type):
        context, lists = sequence_example_to_dict(record)
        yield ({k: _np_values(context[k]) for k in pick(context, context_description)},
               {k: [_np_values(step) for step in lists[k]]
                for k in pick(lists, features_description)})


def tfrecord_loader(data_path: str, index_path: Optional[str], description: Description = None,
                    shard: Optional[Tuple[int, int]] = None,
                    sequence_description: Description = None,
                    compression_type: Optional[str] = None):
    """:func:`example_loader`, or :func:`sequence_loader` when ``sequence_description`` is given
    (an empty one meaning every feature list)."""
    if sequence_description is not None:
        return sequence_loader(data_path, index_path, description, sequence_description, shard,
                               compression_type)
    return example_loader(data_path, index_path, description, shard, compression_type)
