"""tfrec_fast: fast, checksum-verified TFRecord reading and writing with a C++ core."""

from .crc import crc32c, crc32c_backend, masked_crc32c
from .errors import DataLossError
from .records import (RecordBatch, TFRecordReader, TFRecordWriter, count_records,
                      read_records)

__version__ = "0.1.0"

__all__ = [
    "DataLossError",
    "RecordBatch",
    "TFRecordReader",
    "TFRecordWriter",
    "count_records",
    "crc32c",
    "crc32c_backend",
    "masked_crc32c",
    "read_records",
]
