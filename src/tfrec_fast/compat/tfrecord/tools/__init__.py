"""The ``tfrecord`` package's tools."""

from . import tfrecord2idx
from .tfrecord2idx import create_index

__all__ = ["create_index", "tfrecord2idx"]
