"""tfrec_fast: fast, checksum-verified TFRecord reading and writing with a C++ core."""

from . import proto
from ._version import __version__ as __version__
from .columns import BytesColumn, Ragged
from .crc import crc32c, crc32c_backend, masked_crc32c
from .encode import (
    Bytes,
    Floats,
    Int64s,
    Partial,
    encode_example,
    encode_examples,
    encode_sequence_example,
    encode_sequence_examples,
)
from .errors import DataLossError, ExampleParseError, ObjectChangedError
from .example import parse_example, parse_examples, parse_sequence_examples, read_examples
from .index import IndexedTFRecordReader, create_index, load_index
from .records import (
    RecordBatch,
    TFRecordReader,
    TFRecordWriter,
    count_records,
    read_batches,
    read_records,
)
from .sharded import ShardedWriter, read_manifest
from .spec import FixedLen, FixedLenSequence, VarLen, VarLenSequence

__all__ = [
    "Bytes",
    "BytesColumn",
    "DataLossError",
    "ExampleParseError",
    "FixedLen",
    "FixedLenSequence",
    "IndexedTFRecordReader",
    "Floats",
    "ObjectChangedError",
    "Int64s",
    "Partial",
    "Ragged",
    "RecordBatch",
    "ShardedWriter",
    "TFRecordReader",
    "TFRecordWriter",
    "VarLen",
    "VarLenSequence",
    "count_records",
    "create_index",
    "crc32c",
    "crc32c_backend",
    "encode_example",
    "encode_examples",
    "encode_sequence_example",
    "encode_sequence_examples",
    "load_index",
    "masked_crc32c",
    "parse_example",
    "parse_examples",
    "parse_sequence_examples",
    "proto",
    "read_batches",
    "read_examples",
    "read_manifest",
    "read_records",
]
