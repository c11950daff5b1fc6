"""The ``tfrecord`` package's writer: ``write({"name": (value, "byte" | "float" | "int")})``,
with ``sequence_datum`` for a SequenceExample; encoded in C++, framed by tfrec_fast's writer."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ... import encode
from ...records import TFRecordWriter as _Writer

__all__ = ["TFRecordWriter"]

_KINDS = {"byte": encode.Bytes, "float": encode.Floats, "int": encode.Int64s}


def _typed(value, dtype: str, key: str):
    if dtype not in _KINDS:
        raise KeyError(f"feature {key!r}: dtype must be 'byte', 'float' or 'int', not {dtype!r}")
    if not isinstance(value, (list, tuple, np.ndarray)):
        value = [value]
    return _KINDS[dtype](value)


class TFRecordWriter:
    """Opens a TFRecord file for writing (``data_path``; also any tfrec_fast destination)."""

    def __init__(self, data_path: str) -> None:
        self._writer = _Writer(data_path)

    def close(self) -> None:
        """Closes the file; every record written is then complete on disk."""
        self._writer.close()

    def write(
        self,
        datum: Dict[str, Tuple[Any, str]],
        sequence_datum: Optional[Dict[str, Tuple[List[Any], str]]] = None,
    ) -> None:
        """Writes one Example from ``datum`` ({name: (value, dtype)}), or, given
        ``sequence_datum`` ({name: (steps, dtype)}), one SequenceExample with ``datum`` as its
        context. A value that is not a list, tuple or array is a list of one."""
        context = {k: _typed(v, t, k) for k, (v, t) in datum.items()}
        if sequence_datum is None:
            self._writer.write(encode.encode_example(context))
            return
        lists = {
            k: _KINDS[t]([_typed(step, t, k) for step in steps])
            if t in _KINDS
            else _typed(steps, t, k)
            for k, (steps, t) in sequence_datum.items()
        }
        self._writer.write(encode.encode_sequence_example(context, lists))

    def __enter__(self) -> "TFRecordWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
