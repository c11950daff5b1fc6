"""PyTorch datasets over TFRecord files (needs ``pip install tfrec_fast[torch]``).

- :class:`TFRecordDataset`: an ``IterableDataset`` streaming one or many files, split across
  DataLoader workers and distributed ranks so every record is read exactly once per epoch;
  optional bounded shuffle buffer, reproducible per epoch (:meth:`~TFRecordDataset.set_epoch`).
- :class:`MultiTFRecordDataset`: several datasets mixed by weight, infinite by default.
- :class:`IndexedTFRecordDataset`: a map-style ``Dataset`` (random access through an index):
  works with any sampler, including ``RandomSampler`` (an exact shuffle) and
  ``DistributedSampler``; ``__getitems__`` reads a whole DataLoader batch in one call.
- :func:`collate`: ``default_collate`` that hands batches from workers over through shared
  memory.

Records come out as dicts of tensors made with ``torch.from_numpy`` from the parsed columns
(no copy): each record's tensors are views of its batch's column. Values by spec:

- ``FixedLen(shape, "int64" | "float32")`` -> tensor ``shape`` (batched: ``[B, *shape]``)
- ``FixedLen(shape, "uint8" | any numpy dtype)`` (raw bytes feature) -> tensor of that dtype
- ``FixedLen((), "bytes")`` -> ``bytes``; ``FixedLen((k,), "bytes")``/``VarLen("bytes")`` ->
  list of ``bytes`` (batched: a list per record)
- ``VarLen("int64" | "float32")`` -> 1-D tensor (batched: a list of B tensors, or with
  ``ragged="splits"`` a tuple ``(values, row_splits)``, row i being
  ``values[row_splits[i]:row_splits[i + 1]]``)
- ``spec=None`` -> the serialized record as ``bytes``.

The ``tfrecord`` package's datasets, with its arguments and values, are in
:mod:`tfrec_fast.compat.tfrecord.torch`.
"""

from ._collate import collate
from ._indexed import IndexedTFRecordDataset
from ._multi import MultiTFRecordDataset
from ._streaming import TFRecordDataset

__all__ = ["TFRecordDataset", "MultiTFRecordDataset", "IndexedTFRecordDataset", "collate"]
