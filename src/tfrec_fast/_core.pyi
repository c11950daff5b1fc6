"""Type stubs for the C++ extension (private: use the tfrec_fast package)."""

from typing import (
    Any,
    Callable,
    ClassVar,
    Iterable,
    Iterator,
    List,
    Literal,
    Mapping,
    Optional,
    Tuple,
    Union,
    overload,
)

import numpy as np
import numpy.typing as npt

BytesLike = Union[bytes, bytearray, memoryview, npt.NDArray[np.uint8]]

FRAMING_SIZE: int  # bytes around each record payload (length, its CRC, data CRC)

def crc32c(data: BytesLike, value: int = 0) -> int: ...
def masked_crc32c(data: BytesLike) -> int: ...
def crc32c_backend() -> str: ...
def crc32c_backends() -> List[str]: ...
def crc32c_with(backend: str, data: BytesLike, value: int = 0) -> int: ...

class Kind:
    """The kind of a Feature's values; the values are the Feature oneof's field numbers."""

    BYTES: ClassVar["Kind"]  # 1: bytes_list
    FLOAT: ClassVar["Kind"]  # 2: float_list (float32)
    INT64: ClassVar["Kind"]  # 3: int64_list
    FEATURE: ClassVar["Kind"]  # 4: encoder input only, each row one serialized Feature message
    __members__: ClassVar[dict[str, "Kind"]]
    def __init__(self, value: int) -> None: ...
    def __int__(self) -> int: ...
    def __index__(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> int: ...

class Layout:
    """How a requested feature lands in its decoded column."""

    FIXED: ClassVar["Layout"]  # exactly `count` values per record
    VAR: ClassVar["Layout"]  # any number of values per record, plus row_splits
    RAW_BYTES: ClassVar["Layout"]  # one bytes value of exactly `count` bytes per record
    __members__: ClassVar[dict[str, "Layout"]]
    def __init__(self, value: int) -> None: ...
    def __int__(self) -> int: ...
    def __index__(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> int: ...

# ---- Example encoding: columns in, records out ---------------------------------------------------
#
# A column of N rows is a tuple (kind, values, offsets, row_splits[, present]):
#   kind        Kind.INT64, FLOAT, BYTES or FEATURE (one serialized Feature message per row)
#   values      INT64: int64 elements; FLOAT: float32 elements (any C-contiguous buffer in native
#               byte order: numpy, array.array, memoryview); BYTES and FEATURE: a list of bytes
#               objects (one value each, read in place), or one bytes-like buffer
#   offsets     for a buffer: int64 [M + 1], value j = values[offsets[j]:offsets[j + 1]] (Arrow's
#               layout), or a pair (starts, ends) of int64 [M] (BytesColumn's), or None: the whole
#               buffer is one value. None otherwise.
#   row_splits  int64 [N + 1]: row i holds values row_splits[i]..row_splits[i + 1]; or None: row i
#               holds value i alone
#   present     bool/uint8 [N] or None: a row whose flag is false leaves the feature out of its
#               record (a missing feature, not an empty list)
# Arrays that can change are copied with the GIL held, immutable ones (bytes, views of bytes or of
# a RecordBatch) are held; every bound is checked (ValueError naming the feature and row) before
# the GIL is released and the records are written.
_Values = Any  # an int64/float32 buffer, a bytes-like buffer, or a list of bytes objects
_Offsets = Union[None, npt.NDArray[np.int64], Tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]
_Column = Union[
    Tuple[Kind, _Values, _Offsets, Optional[npt.NDArray[np.int64]]],
    Tuple[Kind, _Values, _Offsets, Optional[npt.NDArray[np.int64]], Any],
]

def encode_examples(columns: Mapping[Union[str, bytes], _Column], num_rows: int) -> "RecordBatch":
    """N serialized Examples: record i holds row i of each column, in the mapping's order."""

def encode_example(
    features: Mapping[Any, Any],  # names: str or bytes
    convert: Optional[Callable[[Any, Any], Tuple[Kind, Any, _Offsets]]] = None,
) -> bytes:
    """One serialized Example: {name: (kind, values, offsets)}, each feature all its values (a
    single INT64 or FLOAT value may be a Python int or float)."""

def encode_sequence_examples(
    context: Mapping[Union[str, bytes], _Column],
    feature_lists: Mapping[Union[str, bytes], Tuple[_Column, npt.NDArray[np.int64]]],
    num_rows: int,
) -> "RecordBatch":
    """N SequenceExamples: context columns of N rows; per feature list (steps column, step
    splits [N + 1]): record i's steps are rows splits[i]..splits[i + 1] of the steps column."""

def encode_features(name: Union[str, bytes], column: _Column) -> "RecordBatch":
    """Each row of a column as one serialized Feature message."""

# ---- Example decoding -----------------------------------------------------------------------------

class FieldSpec:
    """One feature for decode_examples to read."""
    def __init__(
        self,
        name: str,
        kind: Kind,
        layout: Layout,
        *,
        count: int = 0,
        default: Optional[BytesLike] = None,
        sequence: bool = False,
        required: bool = False,
    ) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> Kind: ...
    @property
    def layout(self) -> Layout: ...
    @property
    def count(self) -> int: ...
    @property
    def default(self) -> Optional[bytes]: ...
    @property
    def sequence(self) -> bool: ...
    @property
    def required(self) -> bool: ...

class FieldSpecs:
    """FieldSpec objects checked and copied once, for many decode_examples calls."""
    def __init__(self, specs: Iterable[FieldSpec]) -> None: ...
    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> FieldSpec: ...
    @property
    def records_for_pool(self) -> int:
        """The fewest records for which decode_examples takes a column's buffer from its pool."""

_Raw = Optional[npt.NDArray[Any]]

def decode_examples(
    batch: "RecordBatch",
    specs: Union[FieldSpecs, List[FieldSpec]],
    name: str,
    sequence_examples: bool = False,
    num_threads: Optional[int] = None,
    presence: bool = True,
    pool: Optional["BufferPool"] = None,
) -> List[Tuple[_Raw, _Raw, _Raw, _Raw, _Raw, _Raw]]:
    """Per spec (values, starts, ends, row_splits, step_splits, present), None where the layout
    has no such array: values int64/float32 (uint8 for raw bytes); present (presence=True), 1
    per record holding a VarLen feature. num_threads None: chosen from the batch's size. pool:
    where the values of fixed-size columns of 1 MiB or more come from and go back to."""

def _task_pool_threads() -> int:
    """How many worker threads the process's decode pool has started."""

def feature_kinds(
    batch: "RecordBatch", name: str, sequence_examples: bool = False, strict: bool = True
) -> List[Tuple[bytes, Optional[Kind], int]]:
    """(name, kind of its list or None, first record) of each feature the records hold."""

def bytes_values(
    values: BytesLike, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64], fallback: bytes
) -> List[bytes]:
    """[bytes(values[starts[j]:ends[j]]) for j] (a start of -1: fallback)."""

def gather_bytes(
    values: BytesLike, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
) -> Tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(buffer, starts, ends): the values copied back to back into a new array (-1 stays -1)."""

class RecordBatch:
    @staticmethod
    def from_records(records: Iterable[BytesLike]) -> "RecordBatch": ...
    @staticmethod
    def concat(
        batches: List["RecordBatch"], pool: Optional["BufferPool"] = None
    ) -> "RecordBatch": ...
    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> memoryview: ...
    @overload
    def __iter__(self, copy: Literal[False] = False) -> Iterator[memoryview]: ...
    @overload
    def __iter__(self, copy: Literal[True]) -> Iterator[bytes]: ...
    @overload
    def __iter__(self, copy: bool) -> Iterator[Union[memoryview, bytes]]: ...
    @property
    def data(self) -> npt.NDArray[np.uint8]: ...
    @property
    def offsets(self) -> npt.NDArray[np.int64]: ...
    @property
    def positions(self) -> npt.NDArray[np.int64]: ...
    @property
    def nbytes(self) -> int: ...
    def to_list(self) -> List[bytes]: ...
    def to_arrow(self, large_types: bool = True) -> Any: ...  # a pyarrow.LargeBinaryArray
    @staticmethod
    def gather(
        source: "RecordBatch",
        starts: npt.NDArray[np.int64],
        ends: npt.NDArray[np.int64],
        default: bytes,
        out: Any,
    ) -> None: ...

class BufferPool:
    def __init__(self, max_buffers: int, max_bytes: int = ..., hot_bytes: int = ...) -> None: ...
    @property
    def max_buffers(self) -> int: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def hot_bytes(self) -> int: ...
    @property
    def kept_bytes(self) -> int: ...

class RecordReader:
    @staticmethod
    def open_path(
        path: str,
        *,
        compression: str = "",
        verify: bool = True,
        copy: bool = False,
        buffer_size: int,
        batch_records: int,
        batch_bytes: int,
        skip_corrupt: bool = False,
    ) -> "RecordReader": ...
    @staticmethod
    def open_memory(
        data: BytesLike,
        name: str,
        *,
        compression: str = "",
        verify: bool = True,
        copy: bool = False,
        buffer_size: int,
        batch_records: int,
        batch_bytes: int,
        skip_corrupt: bool = False,
    ) -> "RecordReader": ...
    @staticmethod
    def open_file(
        file: Any,
        name: str,
        *,
        compression: str = "",
        verify: bool = True,
        copy: bool = False,
        buffer_size: int,
        batch_records: int,
        batch_bytes: int,
        skip_corrupt: bool = False,
    ) -> "RecordReader": ...
    def skipped(self) -> List[Any]: ...  # DataLossErrors of the damage skipped since the last call
    def __iter__(self) -> "RecordReader": ...
    def __next__(self) -> Union[memoryview, bytes]: ...
    def read_batch(self, max_records: int, max_bytes: int) -> RecordBatch: ...
    def count(self) -> int: ...
    def tell(self) -> int: ...
    @property
    def records_read(self) -> int: ...
    def close(self) -> None: ...
    def set_pool(self, pool: BufferPool) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def name(self) -> str: ...

class RecordWriter:
    @staticmethod
    def create_path(
        path: str, compression: str, level: int, buffer_size: int
    ) -> "RecordWriter": ...
    @staticmethod
    def create_file(
        file: Any, name: str, compression: str, level: int, buffer_size: int
    ) -> "RecordWriter": ...
    def write(self, record: BytesLike) -> None: ...
    def write_batch(self, records: Union[RecordBatch, Iterable[BytesLike]]) -> None: ...
    def flush(self, sync: bool = False) -> None: ...
    def close(self) -> None: ...
    @property
    def records_written(self) -> int: ...

def scan_index(path: str) -> Tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]: ...
def format_index(offsets: npt.NDArray[np.int64], sizes: npt.NDArray[np.int64]) -> bytes: ...
def parse_index(
    data: BytesLike, name: str
) -> Tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]: ...
def check_fetched(
    data: bytes,
    name: str,
    starts: npt.NDArray[np.int64],
    indices: npt.NDArray[np.int64],
    offsets: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int64],
    verify: bool,
) -> RecordBatch: ...

class IndexedReader:
    def __init__(
        self,
        path: str,
        offsets: npt.NDArray[np.int64],
        sizes: npt.NDArray[np.int64],
        verify: bool = True,
        max_gap: int = 65536,
        max_read: int = 8388608,
        pool: Optional[BufferPool] = None,
    ) -> None: ...
    def read(self, indices: npt.NDArray[np.int64]) -> RecordBatch: ...
    def read_one(self, index: int) -> bytes: ...
    def __len__(self) -> int: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def path(self) -> str: ...
