"""Tensors as Ray's TFRecord writer stores them: each one a serialized TensorFlow TensorProto
(what ``tf.io.serialize_tensor`` gives and ``tf.io.parse_tensor`` reads), in a bytes feature.

The message is encoded here from TensorFlow's tensor.proto field numbers (dtype 1, tensor_shape
2 with its dims 2 / size 1, tensor_content 4, string_val 8): TensorFlow is never imported.
"""

from __future__ import annotations

from typing import List, Optional

import numpy as np
import pyarrow as pa

# numpy dtype (little-endian, as tensor_content is) -> TensorFlow DataType (types.proto)
_DT = {
    np.dtype(t).newbyteorder("<"): code
    for t, code in (
        (np.float32, 1),
        (np.float64, 2),
        (np.int32, 3),
        (np.uint8, 4),
        (np.int16, 5),
        (np.int8, 6),
        (np.complex64, 8),
        (np.int64, 9),
        (np.bool_, 10),
        (np.uint16, 17),
        (np.complex128, 18),
        (np.float16, 19),
        (np.uint32, 22),
        (np.uint64, 23),
    )
}
_DT_STRING = 7


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def tensor_proto(tensor: np.ndarray) -> bytes:
    """The serialized TensorProto of a numpy array (numbers, bools, bytes or str)."""
    tensor = np.asarray(tensor)
    shape = b"".join(_field(2, _varint(1 << 3) + _varint(int(d))) for d in tensor.shape)
    if tensor.dtype.kind in "OSU":
        strings = [v.encode() if isinstance(v, str) else bytes(v) for v in tensor.reshape(-1)]
        return (
            _varint(1 << 3)
            + _varint(_DT_STRING)
            + _field(2, shape)
            + b"".join(_field(8, s) for s in strings)
        )
    little = tensor.dtype.newbyteorder("<")
    code = _DT.get(little)
    if code is None:
        raise TypeError(f"a tensor of dtype {tensor.dtype} has no TensorFlow DataType")
    content = np.ascontiguousarray(tensor, dtype=little).tobytes()
    return (
        _varint(1 << 3)
        + _varint(code)
        + _field(2, shape)
        + (_field(4, content) if content else b"")
    )  # (as TensorFlow: none when empty)


def is_tensor_type(t: pa.DataType) -> bool:
    """Ray's tensor extension types and pyarrow's fixed_shape_tensor."""
    from ray.data._internal.tensor_extensions.arrow import get_arrow_extension_tensor_types

    return isinstance(t, get_arrow_extension_tensor_types())


def serialized_tensors(column) -> pa.Array:
    """A tensor column as a binary column of serialized TensorProtos (null stays null)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    if isinstance(column.type, pa.FixedShapeTensorType):
        tensors = column.to_numpy_ndarray()
    else:
        tensors = column.to_numpy()
    out: List[Optional[bytes]] = [tensor_proto(t) if ok else None for t, ok in zip(tensors, valid)]
    return pa.array(out, pa.binary())
