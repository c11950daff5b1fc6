"""The ``tfrecord`` package's reader functions; kept here for code written against earlier
versions: the compatibility layer lives in :mod:`tfrec_fast.compat.tfrecord`."""

from .compat.tfrecord.reader import (example_loader, multi_tfrecord_loader, sequence_loader,
                                     tfrecord_iterator, tfrecord_loader)

__all__ = ["tfrecord_iterator", "example_loader", "sequence_loader", "tfrecord_loader",
           "multi_tfrecord_loader"]
