"""Feature specs: what to read of each feature (FixedLen, VarLen and the SequenceExample forms),
the spec forms accepted besides them (TensorFlow's feature objects, the `tfrecord` package's
descriptions), and specs as JSON (manifests, Ray's sinks).
"""

from __future__ import annotations

import base64
from typing import Any, Dict, Mapping, Optional, Union

import numpy as np

from . import _core

__all__ = [
    "FixedLen",
    "VarLen",
    "FixedLenSequence",
    "VarLenSequence",
    "Spec",
    "normalize_spec",
    "spec_to_json",
    "spec_from_json",
]

_INT64, _FLOAT, _BYTES = _core.Kind.INT64, _core.Kind.FLOAT, _core.Kind.BYTES
_NUMPY: Dict[_core.Kind, np.dtype] = {_INT64: np.dtype(np.int64), _FLOAT: np.dtype(np.float32)}
_KIND_DTYPE: Dict[_core.Kind, str] = {_INT64: "int64", _FLOAT: "float32", _BYTES: "bytes"}

_KIND_NAMES = {
    "int64": _INT64,
    "int": _INT64,
    "float32": _FLOAT,
    "float": _FLOAT,
    "bytes": _BYTES,
    "byte": _BYTES,
    "string": _BYTES,
    "str": _BYTES,
}


def _kind_of(dtype) -> Optional[_core.Kind]:
    """The list kind a dtype names (int64 / float32 / bytes), or None for other numeric dtypes."""
    if isinstance(dtype, str) and dtype in _KIND_NAMES:
        return _KIND_NAMES[dtype]
    if dtype in (bytes, str, object):
        return _BYTES
    name = getattr(dtype, "name", None)  # a TensorFlow DType, duck-typed
    if isinstance(name, str) and not isinstance(dtype, np.dtype) and name in _KIND_NAMES:
        return _KIND_NAMES[name]
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(
            f"unknown dtype {dtype!r}: a feature holds 'int64' (or 'int'), 'float32' ('float') "
            "or 'bytes' ('byte', 'string', 'str'); FixedLen also takes any other numpy dtype "
            "('uint8', 'float16', ...) to read a bytes feature as a raw array"
        ) from None
    if dt == np.int64:
        return _INT64
    if dt == np.float32:
        return _FLOAT
    return None


class _SpecObject:
    """A spec class whose objects remember a hashable summary of what the decoder needs from
    them (the key of the parse plan cache, see _plan), forgotten when any attribute is set."""

    _key: Optional[tuple] = None

    def __setattr__(self, name: str, value) -> None:
        object.__setattr__(self, name, value)
        if name != "_key":
            object.__setattr__(self, "_key", None)

    def _summary(self) -> Optional[tuple]:
        """The plan cache's key for this spec (None: not cacheable)."""
        raise NotImplementedError


class FixedLen(_SpecObject):
    """Exactly ``prod(shape)`` values per record, returned as an array ``[N, *shape]``.

    ``dtype`` is ``"int64"``, ``"float32"`` or ``"bytes"``. Any other numpy dtype (``"uint8"``,
    ``"float16"``, ...) reads a bytes feature holding the raw array, as
    ``np.frombuffer(value, dtype).reshape(shape)`` would (``from_bytes=True`` forces this for
    int64/float32 too). A missing feature takes ``default`` (broadcast to ``shape``); without one
    it is an :class:`~tfrec_fast.ExampleParseError`.
    """

    def __init__(self, shape=(), dtype="int64", default=None, *, from_bytes: Optional[bool] = None):
        self.shape = (
            (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
        )
        kind = _kind_of(dtype)
        self.from_bytes = kind is None if from_bytes is None else bool(from_bytes)
        if self.from_bytes and kind == _BYTES:
            raise ValueError("from_bytes needs a numeric dtype")
        if kind is None and not self.from_bytes:
            raise ValueError(
                f"FixedLen dtype {dtype!r} is read from raw bytes: from_bytes=False "
                "needs 'int64', 'float32' or 'bytes'"
            )
        self.kind: _core.Kind = _BYTES if self.from_bytes or kind is None else kind
        if self.from_bytes:
            self.dtype: np.dtype = np.dtype(_NUMPY[kind] if kind is not None else dtype)
        else:
            self.dtype = (
                _NUMPY.get(kind, np.dtype(object)) if kind is not None else np.dtype(object)
            )
        if kind == _BYTES and isinstance(default, str):
            default = default.encode()
        self.default = default

    def __repr__(self):
        dtype = "bytes" if self.kind == _BYTES and not self.from_bytes else str(self.dtype)
        return f"FixedLen({self.shape}, {dtype!r}, default={self.default!r})"

    def _summary(self) -> Optional[tuple]:
        default = self.default
        if default is not None and not _frozen(default):
            return None  # a list or array could change in place after being summarised
        # repr beside the value: 0.0 == -0.0, but their defaults' bytes differ
        return (
            FixedLen,
            self.kind,
            self.shape,
            self.dtype,
            self.from_bytes,
            default,
            repr(default),
        )


class VarLen(_SpecObject):
    """Any number of values per record: a :class:`Ragged` (numeric) or a :class:`BytesColumn`.

    A record without the feature reads as no values, as TensorFlow's VarLenFeature does
    (``default=[]``). ``default=None`` makes the feature required: a record without it is an
    :class:`~tfrec_fast.ExampleParseError` naming the feature (a misspelled name is caught at
    once). The ``tfrecord`` package's descriptions (``{"name": "int"}``) are required, as there.
    """

    def __init__(self, dtype="int64", default=()):
        self.kind = _kind_of(dtype)
        if self.kind is None:
            raise ValueError(
                f"VarLen takes int64, float32 or bytes, not {dtype!r} (other "
                "numpy dtypes mean a raw bytes array: use FixedLen)"
            )
        if default is not None and len(default) != 0:
            raise ValueError(
                "a VarLen default can only be empty ([]): a missing feature has "
                "no values; default=None makes the feature required"
            )
        self.default = None if default is None else []

    def __repr__(self):
        extra = ", default=None" if self.default is None else ""
        return f"VarLen({_KIND_DTYPE[self.kind]!r}{extra})"

    def _summary(self) -> Optional[tuple]:
        return (type(self), self.kind, self.default is None)


class _Described(VarLen):
    """A feature named in a ``tfrecord``-package description (``{"name": "int"}``): a record may
    lack it (it has no values there), but a batch in which no record holds it is an error, for
    that is a misspelled name (the ``tfrecord`` package raises KeyError)."""

    def __repr__(self):
        return repr(
            _KIND_DTYPE[self.kind]
            .replace("int64", "int")
            .replace("float32", "float")
            .replace("bytes", "byte")
        )


class FixedLenSequence(_SpecObject):
    """A SequenceExample feature list whose every step holds exactly ``prod(shape)`` values."""

    def __init__(self, shape=(), dtype="int64"):
        self.shape = (
            (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
        )
        self.kind = _kind_of(dtype)
        if self.kind is None:
            raise ValueError(f"FixedLenSequence takes int64, float32 or bytes, not {dtype!r}")
        if self.kind == _BYTES and self.shape != ():
            raise ValueError("a bytes FixedLenSequence has shape ()")

    def _summary(self) -> Optional[tuple]:
        return (FixedLenSequence, self.kind, self.shape)


class VarLenSequence(_SpecObject):
    """A SequenceExample feature list whose steps hold any number of values."""

    def __init__(self, dtype="int64"):
        self.kind = _kind_of(dtype)
        if self.kind is None:
            raise ValueError(f"VarLenSequence takes int64, float32 or bytes, not {dtype!r}")

    def _summary(self) -> Optional[tuple]:
        return (VarLenSequence, self.kind)


def _frozen(value) -> bool:
    """Whether a default can never change in place (so a summary of it stays true)."""
    if isinstance(value, tuple):
        return all(_frozen(v) for v in value)
    return isinstance(value, (bytes, str, int, float, np.generic))


Spec = Union[FixedLen, VarLen]


def _from_tensorflow(feature) -> Spec:
    """A tf.io.FixedLenFeature / VarLenFeature, duck-typed (TensorFlow is never imported)."""
    kind = type(feature).__name__
    if kind == "VarLenFeature":
        return VarLen(feature.dtype)
    if kind == "FixedLenFeature":
        return FixedLen(tuple(feature.shape), feature.dtype, feature.default_value)
    raise TypeError(f"unsupported TensorFlow feature spec {kind}")


def normalize_spec(spec) -> Dict[str, Optional[Spec]]:
    """Accepts {name: FixedLen | VarLen}, the `tfrecord` package's description
    ({name: "byte" | "float" | "int"}), TensorFlow's FixedLenFeature/VarLenFeature objects, or a
    list of names (kinds then come from the data). Returns {name: spec or None}."""
    if isinstance(spec, (list, tuple)):
        return {str(name): None for name in spec}
    if type(spec) is not dict and not isinstance(spec, Mapping):  # (the ABC check is slow)
        raise TypeError(
            "spec must be a dict {name: FixedLen | VarLen | 'int' | 'float' | "
            "'byte'} or a list of feature names, not " + type(spec).__name__
        )
    out: Dict[str, Optional[Spec]] = {}
    for name, s in spec.items():
        if isinstance(s, (FixedLen, VarLen)) or s is None:
            out[name] = s
        elif isinstance(s, str):  # the tfrecord package's description
            out[name] = _Described(s)
        elif type(s).__name__ in ("FixedLenFeature", "VarLenFeature"):
            out[name] = _from_tensorflow(s)
        else:
            raise TypeError(f"feature {name!r}: unsupported spec {s!r}")
    return out


# ---- specs as JSON (manifests, Ray's sinks) ----------------------------------------------


def spec_to_json(spec) -> Optional[Dict[str, Any]]:
    """A feature spec (what :func:`~tfrec_fast.parse_examples` takes, plus FixedLenSequence /
    VarLenSequence entries) as JSON-able data; ``None`` stays ``None``.

    Each feature becomes ``{"kind": "FixedLen", "shape": [...], "dtype": ..., "from_bytes": ...,
    "default": ...}``, ``{"kind": "VarLen", "dtype": ...}``, ``{"kind": "FixedLenSequence",
    "shape": [...], "dtype": ...}`` or ``{"kind": "VarLenSequence", "dtype": ...}``; a feature
    given by name only is ``null``. ``dtype`` is "int64", "float32", "bytes" or (FixedLen from
    raw bytes) a numpy dtype string; a bytes default is ``{"base64": "..."}``.
    """
    if spec is None:
        return None
    if isinstance(spec, (list, tuple)):
        return {name: None for name in normalize_spec(spec)}
    out = {}
    for name, feature in spec.items():
        if not isinstance(feature, (FixedLenSequence, VarLenSequence)):
            feature = normalize_spec({name: feature})[name]
        out[str(name)] = _feature_to_json(feature)
    return out


def _feature_to_json(s) -> Optional[Dict[str, Any]]:
    if s is None:
        return None
    if isinstance(s, FixedLen):
        return {
            "kind": "FixedLen",
            "shape": list(s.shape),
            "dtype": str(s.dtype) if s.from_bytes else _KIND_DTYPE[s.kind],
            "from_bytes": s.from_bytes,
            "default": _default_to_json(s),
        }
    if isinstance(s, FixedLenSequence):
        return {"kind": "FixedLenSequence", "shape": list(s.shape), "dtype": _KIND_DTYPE[s.kind]}
    if isinstance(s, VarLenSequence):
        return {"kind": "VarLenSequence", "dtype": _KIND_DTYPE[s.kind]}
    out: Dict[str, Any] = {"kind": "VarLen", "dtype": _KIND_DTYPE[s.kind]}
    if s.default is None:
        out["default"] = None  # required in every record
    return out


def _default_to_json(s: FixedLen):
    if s.default is None:
        return None
    if s.kind == _BYTES and not s.from_bytes:
        return {"base64": base64.b64encode(bytes(s.default)).decode("ascii")}
    return np.asarray(s.default, s.dtype).tolist()


def spec_from_json(data: Optional[Mapping[str, Any]]):
    """Inverse of :func:`spec_to_json`: spec objects usable by :func:`~tfrec_fast.parse_examples`
    (FixedLenSequence / VarLenSequence entries go to ``parse_sequence_examples``)."""
    if data is None:
        return None
    return {name: None if f is None else _feature_from_json(name, f) for name, f in data.items()}


def _feature_from_json(name: str, f: Mapping[str, Any]):
    kind = f.get("kind")
    if kind == "FixedLen":
        default = f.get("default")
        if isinstance(default, dict):
            default = base64.b64decode(default["base64"])
        return FixedLen(tuple(f["shape"]), f["dtype"], default, from_bytes=f.get("from_bytes"))
    if kind == "VarLen":
        return VarLen(f["dtype"], default=f.get("default", []))
    if kind == "FixedLenSequence":
        return FixedLenSequence(tuple(f["shape"]), f["dtype"])
    if kind == "VarLenSequence":
        return VarLenSequence(f["dtype"])
    raise ValueError(f"feature {name!r}: unknown spec kind {kind!r}")
