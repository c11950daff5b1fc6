"""The ``tfrecord`` package's API (vahidk/tfrecord 1.14), module for module, on tfrec_fast:
``import tfrecord`` becomes ``import tfrec_fast.compat.tfrecord as tfrecord``, and
``from tfrecord.torch.dataset import TFRecordDataset`` becomes
``from tfrec_fast.compat.tfrecord.torch.dataset import TFRecordDataset``.

Same names, arguments and values; what differs is listed in :mod:`.reader`: both CRCs are
checked, records never alias each other, gzip and zlib are read, parsing runs in C++.
"""

from . import example_pb2, iterator_utils, reader, tools, writer
from .iterator_utils import cycle, sample_iterators, shuffle_iterator
from .reader import (
    example_loader,
    multi_tfrecord_loader,
    sequence_loader,
    tfrecord_iterator,
    tfrecord_loader,
)
from .writer import TFRecordWriter

try:  # as in the tfrecord package: the torch datasets when PyTorch is installed
    from . import torch  # noqa: F401 (the package's torch module, as tfrecord.torch)
except ImportError:  # pragma: no cover - PyTorch missing
    pass

__all__ = [
    "TFRecordWriter",
    "cycle",
    "example_loader",
    "example_pb2",
    "iterator_utils",
    "multi_tfrecord_loader",
    "reader",
    "sample_iterators",
    "sequence_loader",
    "shuffle_iterator",
    "tfrecord_iterator",
    "tfrecord_loader",
    "tools",
    "writer",
]
