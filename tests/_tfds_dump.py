"""The file format of the TFDS fixture's dumps: what tfds.as_numpy gave, as gzipped JSON.

Pickle-free and exact: numbers travel as the bytes of their numpy dtype (base64), so a value
read back is bit for bit what was written, dtype and shape included. A value is one of
- ``bytes`` (a string tensor of shape ())
- a numpy scalar (``np.int64(3)``, ``np.float32``, ``np.bool_``, ...: a tensor of shape ())
- a numpy array (numeric, or dtype object holding bytes)
- a :class:`Ragged`: what TensorFlow gives as a tf.RaggedTensor (nested Sequences), as its
  flat values and nested row lengths (outermost first)
- a dict of values, a tuple of values (as_supervised pairs)
- a list of values: a nested tf.data.Dataset (tfds.features.Dataset, RLDS's steps), which
  tfds.as_numpy gives as an iterable of its elements.
Used by tools/make_tfds_fixture.py (writing, with TensorFlow) and the tests (reading, without).
"""

from __future__ import annotations

import base64
import collections.abc
import gzip
import json
import re
from typing import Any, NamedTuple, Tuple

import numpy as np


class Ragged(NamedTuple):
    flat_values: np.ndarray
    nested_row_lengths: Tuple[np.ndarray, ...]


def key(split: str, decoded: bool) -> str:
    return f"{split}/{'decoded' if decoded else 'encoded'}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def encode(value: Any) -> Any:
    if isinstance(value, dict):
        return {"map": {k: encode(v) for k, v in value.items()}}
    if isinstance(value, Ragged):  # before tuples: a Ragged is a NamedTuple
        return {
            "ragged": encode(value.flat_values),
            "row_lengths": [encode(np.asarray(r, np.int64)) for r in value.nested_row_lengths],
        }
    if isinstance(value, tuple):
        return {"tuple": [encode(v) for v in value]}
    if isinstance(value, list):
        return {"list": [encode(v) for v in value]}
    if isinstance(value, bytes):
        return {"bytes": _b64(value)}
    if hasattr(value, "nested_row_lengths") and hasattr(value, "flat_values"):  # tf.RaggedTensor
        return encode(
            Ragged(value.flat_values.numpy(), tuple(r.numpy() for r in value.nested_row_lengths()))
        )
    if isinstance(value, np.generic):
        return {"scalar": value.dtype.str, "data": _b64(value.tobytes())}
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return {
                "array": "object",
                "shape": list(value.shape),
                "items": [_b64(bytes(v)) for v in value.ravel()],
            }
        return {
            "array": value.dtype.str,
            "shape": list(value.shape),
            "data": _b64(np.ascontiguousarray(value).tobytes()),
        }
    if isinstance(value, collections.abc.Iterable):  # a nested dataset, from tfds.as_numpy
        return {"list": [encode(v) for v in value]}
    raise TypeError(f"cannot dump a {type(value).__name__}: {value!r}")


def decode(obj: Any) -> Any:
    if "map" in obj:
        return {k: decode(v) for k, v in obj["map"].items()}
    if "tuple" in obj:
        return tuple(decode(v) for v in obj["tuple"])
    if "list" in obj:
        return [decode(v) for v in obj["list"]]
    if "bytes" in obj:
        return base64.b64decode(obj["bytes"])
    if "ragged" in obj:
        return Ragged(decode(obj["ragged"]), tuple(decode(r) for r in obj["row_lengths"]))
    if "scalar" in obj:
        return np.frombuffer(base64.b64decode(obj["data"]), np.dtype(obj["scalar"]))[0]
    if obj["array"] == "object":
        items = np.empty(len(obj["items"]), dtype=object)
        items[:] = [base64.b64decode(v) for v in obj["items"]]
        return items.reshape(obj["shape"])
    data = base64.b64decode(obj["data"])
    return np.frombuffer(data, np.dtype(obj["array"])).reshape(obj["shape"]).copy()


def save(path: str, dump: dict) -> None:
    """{key(split, decoded): [example, ...]} -> path (gzipped JSON, no timestamp: reproducible)."""
    text = json.dumps(
        {k: [encode(v) for v in examples] for k, examples in dump.items()},
        sort_keys=True,
        separators=(",", ":"),
    )
    with open(path, "wb") as f:
        f.write(gzip.compress(text.encode(), mtime=0))


def load(path: str) -> dict:
    with gzip.open(path, "rt") as f:
        return {k: [decode(v) for v in examples] for k, examples in json.load(f).items()}


# ---- comparing -----------------------------------------------------------------------------


def as_ragged(value: Any) -> Ragged:
    """A tfrec_fast.Ragged (values, row_splits; values may be Ragged again) -> Ragged here."""
    lengths = []
    while hasattr(value, "row_splits") and hasattr(value, "values"):
        lengths.append(np.diff(value.row_splits))
        value = value.values
    return Ragged(value, tuple(lengths))


def differences(ours: Any, ref: Any, path: str = "", tolerance=None) -> list:
    """Where ``ours`` differs from ``ref`` (a dumped value): same types (numpy scalar types,
    bytes, dicts, tuples), dtypes, shapes and bits. ``tolerance``: {path: max absolute
    difference} for values that may differ (JPEG pixels decoded another way), keyed by the end
    of the path without element indices ("/wrist_image" matches
    "/steps[3]/observation/wrist_image")."""
    if hasattr(ours, "row_splits"):
        ours = as_ragged(ours)
    if isinstance(ref, Ragged):
        if not isinstance(ours, Ragged):
            return [f"{path}: {type(ours).__name__}, expected a ragged value"]
        if len(ours.nested_row_lengths) != len(ref.nested_row_lengths):
            return [
                f"{path}: ragged rank {len(ours.nested_row_lengths)}, expected "
                f"{len(ref.nested_row_lengths)}"
            ]
        out = differences(ours.flat_values, ref.flat_values, path + "(flat values)", tolerance)
        for k, (a, b) in enumerate(zip(ours.nested_row_lengths, ref.nested_row_lengths)):
            if not np.array_equal(a, b):
                out.append(f"{path}: row lengths {k}: {a} != {b}")
        return out
    if isinstance(ref, dict):
        if not isinstance(ours, dict) or set(ours) != set(ref):
            return [
                f"{path}: {sorted(ours) if isinstance(ours, dict) else type(ours)}, "
                f"expected keys {sorted(ref)}"
            ]
        return [d for k in ref for d in differences(ours[k], ref[k], f"{path}/{k}", tolerance)]
    if isinstance(ref, (tuple, list)):
        if type(ours) is not type(ref) or len(ours) != len(ref):
            return [
                f"{path}: {type(ours).__name__} of {_size(ours)}, expected a "
                f"{type(ref).__name__} of {len(ref)}"
            ]
        return [
            d
            for i, (a, b) in enumerate(zip(ours, ref))
            for d in differences(a, b, f"{path}[{i}]", tolerance)
        ]
    if type(ours) is not type(ref):
        return [f"{path}: {type(ours).__name__}, expected {type(ref).__name__}"]
    if isinstance(ref, np.ndarray):
        if ours.dtype != ref.dtype or ours.shape != ref.shape:
            return [f"{path}: {ours.dtype}{ours.shape}, expected {ref.dtype}{ref.shape}"]
        if ref.dtype == object:
            return [] if ours.tolist() == ref.tolist() else [f"{path}: {ours!r} != {ref!r}"]
        if ours.tobytes() == ref.tobytes():
            return []
        worst = float(np.max(np.abs(ours.astype(np.float64) - ref.astype(np.float64))))
        where = re.sub(r"\[\d+\]", "", path)  # any element
        allowed = next((v for k, v in (tolerance or {}).items() if where.endswith(k)), None)
        if allowed is not None and worst <= allowed:
            return []
        return [f"{path}: values differ (by up to {worst})"]
    if isinstance(ref, np.generic):
        return [] if ours.tobytes() == ref.tobytes() else [f"{path}: {ours!r} != {ref!r}"]
    return [] if ours == ref else [f"{path}: {ours!r} != {ref!r}"]


def _size(value: Any) -> str:
    try:
        return str(len(value))
    except TypeError:
        return "?"
