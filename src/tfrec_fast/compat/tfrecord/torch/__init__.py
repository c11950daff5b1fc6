"""The ``tfrecord`` package's PyTorch datasets."""

from . import dataset
from .dataset import MultiTFRecordDataset, TFRecordDataset

__all__ = ["MultiTFRecordDataset", "TFRecordDataset", "dataset"]
