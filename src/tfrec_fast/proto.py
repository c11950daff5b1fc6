"""Protobuf message classes for tf.train.Example & co, without TensorFlow.

The classes (Example, Features, Feature, BytesList, FloatList, Int64List, SequenceExample,
FeatureList, FeatureLists) are built at import time with the protobuf runtime from a schema written
out below: no protoc, no generated ``_pb2`` module. Field numbers, types and packing are those of
TensorFlow's ``tensorflow/core/example/{example,feature}.proto`` (proto3, float and int64 lists
``[packed = true]``), so the bytes are interchangeable: our ``SerializeToString()`` parses in
``tf.train.Example.FromString`` and the reverse, and ``SerializeToString(deterministic=True)``
gives the same bytes as TensorFlow's for the same content. (A parser accepts packed and
unpacked lists alike.)

The protobuf package is ``tfrec_fast.v1``, never ``tensorflow``, and the file is added to a
descriptor pool of our own, not the default one: TensorFlow and the ``tfrecord`` package both
register ``tensorflow.Example`` etc. in the default pool, and a second registration of the same
full names is a "duplicate symbol" error. Ours cannot clash with either, so tfrec_fast imports
next to both. The wire format carries no type names, so the package name costs no compatibility.
"""

from __future__ import annotations

import numbers
from typing import Any, Dict, List, Mapping, Tuple

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message import Message

__all__ = [
    "Example",
    "Features",
    "Feature",
    "BytesList",
    "FloatList",
    "Int64List",
    "SequenceExample",
    "FeatureList",
    "FeatureLists",
    "DESCRIPTOR_POOL",
    "PROTO_PACKAGE",
    "example_to_dict",
    "sequence_example_to_dict",
    "dict_to_example",
    "as_serialized",
]

PROTO_PACKAGE = "tfrec_fast.v1"
_FILE_NAME = "tfrec_fast/v1/example.proto"

_F = descriptor_pb2.FieldDescriptorProto
_KINDS = ("bytes_list", "float_list", "int64_list")  # Feature.kind, field numbers 1, 2, 3


def _file_descriptor_proto() -> descriptor_pb2.FileDescriptorProto:
    """TensorFlow's feature.proto + example.proto, in package tfrec_fast.v1."""
    fdp = descriptor_pb2.FileDescriptorProto(
        name=_FILE_NAME, package=PROTO_PACKAGE, syntax="proto3"
    )
    pkg = "." + PROTO_PACKAGE + "."

    def message(name, parent=None):
        return (parent.nested_type if parent is not None else fdp.message_type).add(name=name)

    def field(
        msg, name, number, ftype, *, repeated=False, type_name=None, packed=False, oneof_index=None
    ):
        f = msg.field.add(
            name=name,
            number=number,
            type=ftype,
            label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL,
        )
        if type_name:
            f.type_name = pkg + type_name
        if packed:
            f.options.packed = True
        if oneof_index is not None:
            f.oneof_index = oneof_index
        return f

    def map_field(msg, name, entry_name, value_type):
        entry = message(entry_name, msg)
        entry.options.map_entry = True
        field(entry, "key", 1, _F.TYPE_STRING)
        field(entry, "value", 2, _F.TYPE_MESSAGE, type_name=value_type)
        field(msg, name, 1, _F.TYPE_MESSAGE, repeated=True, type_name=msg.name + "." + entry_name)

    field(message("BytesList"), "value", 1, _F.TYPE_BYTES, repeated=True)
    field(message("FloatList"), "value", 1, _F.TYPE_FLOAT, repeated=True, packed=True)
    field(message("Int64List"), "value", 1, _F.TYPE_INT64, repeated=True, packed=True)
    feature = message("Feature")
    feature.oneof_decl.add(name="kind")
    for number, kind in enumerate(("BytesList", "FloatList", "Int64List"), start=1):
        field(feature, _KINDS[number - 1], number, _F.TYPE_MESSAGE, type_name=kind, oneof_index=0)
    map_field(message("Features"), "feature", "FeatureEntry", "Feature")
    field(message("FeatureList"), "feature", 1, _F.TYPE_MESSAGE, repeated=True, type_name="Feature")
    map_field(message("FeatureLists"), "feature_list", "FeatureListEntry", "FeatureList")
    field(message("Example"), "features", 1, _F.TYPE_MESSAGE, type_name="Features")
    seq = message("SequenceExample")
    field(seq, "context", 1, _F.TYPE_MESSAGE, type_name="Features")
    field(seq, "feature_lists", 2, _F.TYPE_MESSAGE, type_name="FeatureLists")
    return fdp


DESCRIPTOR_POOL = descriptor_pool.DescriptorPool()
DESCRIPTOR = DESCRIPTOR_POOL.Add(_file_descriptor_proto())


def _message_class(name: str):
    desc = DESCRIPTOR_POOL.FindMessageTypeByName(PROTO_PACKAGE + "." + name)
    try:
        from google.protobuf.message_factory import GetMessageClass  # protobuf >= 4.22

        cls = GetMessageClass(desc)
    except ImportError:  # protobuf < 4.22 (4.21.12 has no GetMessageClass)
        from google.protobuf.message_factory import MessageFactory

        cls = MessageFactory(DESCRIPTOR_POOL).GetPrototype(desc)
    # Pickle finds classes by module and name: make that this module.
    cls.__module__ = __name__
    cls.__qualname__ = name
    return cls


BytesList = _message_class("BytesList")
FloatList = _message_class("FloatList")
Int64List = _message_class("Int64List")
Feature = _message_class("Feature")
Features = _message_class("Features")
FeatureList = _message_class("FeatureList")
FeatureLists = _message_class("FeatureLists")
Example = _message_class("Example")
SequenceExample = _message_class("SequenceExample")


# ---- conversions --------------------------------------------------------------------------------


def as_serialized(obj) -> Any:
    """The serialized bytes of `obj`: a bytes-like object as is, else ``obj.SerializeToString()``
    (any protobuf message: ours, TensorFlow's, the tfrecord package's). TypeError otherwise."""
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return obj
    serialize = getattr(obj, "SerializeToString", None)
    if callable(serialize):
        return serialize()
    try:
        memoryview(obj)
    except TypeError:
        raise TypeError(
            "expected a bytes-like object or a protobuf message, not %s" % type(obj).__name__
        ) from None
    return obj


def _parse(cls, obj):
    if isinstance(obj, cls):
        return obj
    data = as_serialized(obj)
    if not isinstance(data, (bytes, bytearray)):
        view = memoryview(data)
        try:
            data = view.cast("B") if (view.format != "B" or view.ndim != 1) else view
        except TypeError:  # not C-contiguous
            data = view.tobytes()
    return cls.FromString(data)


def _values(feature) -> list:
    kind = feature.WhichOneof("kind")
    return [] if kind is None else list(getattr(feature, kind).value)


def _features_to_dict(features) -> Dict[str, list]:
    fmap = features.feature
    return {key: _values(fmap[key]) for key in sorted(fmap)}


def example_to_dict(obj) -> Dict[str, list]:
    """{name: values} of an Example, given serialized (bytes-like) or as any protobuf message
    (tf.train.Example included). int64 -> int, float32 -> float, bytes -> bytes; a Feature with
    no list set -> []. Keys sorted."""
    return _features_to_dict(_parse(Example, obj).features)


def sequence_example_to_dict(obj) -> Tuple[Dict[str, list], Dict[str, List[list]]]:
    """(context {name: values}, feature_lists {name: [values per step]}) of a SequenceExample,
    serialized or as a message. Keys sorted."""
    seq = _parse(SequenceExample, obj)
    flmap = seq.feature_lists.feature_list
    lists = {key: [_values(f) for f in flmap[key].feature] for key in sorted(flmap)}
    return _features_to_dict(seq.context), lists


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _scalar_kind(v):
    if isinstance(v, (bytes, bytearray, memoryview, str, np.bytes_, np.str_)):
        return "bytes_list"
    if isinstance(v, (bool, np.bool_, numbers.Integral)):
        return "int64_list"
    if isinstance(v, numbers.Real):
        return "float_list"
    return None


def _as_bytes(v) -> bytes:
    return v.encode("utf-8") if isinstance(v, str) else bytes(v)


# The message classes are built at run time, so annotations name their base class, Message.
def _array_feature(a: np.ndarray) -> Message:
    a = a.ravel()
    if a.dtype.kind in "biu":
        if a.dtype.kind == "u" and a.size and a.max() > _INT64_MAX:
            raise ValueError("unsigned value larger than the int64 maximum")
        return Feature(int64_list=Int64List(value=a.astype(np.int64).tolist()))
    if a.dtype.kind == "f":
        return Feature(float_list=FloatList(value=a.astype(np.float32).tolist()))
    if a.dtype.kind in "SU":
        return Feature(bytes_list=BytesList(value=[_as_bytes(v) for v in a.tolist()]))
    if a.dtype.kind == "O":
        return _feature(a.tolist())
    raise TypeError("unsupported numpy dtype %s" % a.dtype)


def _feature(value) -> Message:
    if isinstance(value, Feature):
        return value
    if isinstance(value, np.ndarray):
        return _array_feature(value)
    if hasattr(value, "SerializeToString"):
        if getattr(getattr(value, "DESCRIPTOR", None), "name", None) != "Feature":
            raise TypeError("a message other than a Feature (%s)" % type(value).__name__)
        return Feature.FromString(value.SerializeToString())  # e.g. tf.train.Feature
    if isinstance(value, np.generic):
        return _array_feature(np.asarray(value))
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise ValueError(
            "empty list: its type is unknown; pass a typed numpy array "
            "(e.g. np.array([], np.int64)) or a Feature"
        )
    kinds = {_scalar_kind(v) for v in values}
    if None in kinds:
        bad = next(v for v in values if _scalar_kind(v) is None)
        raise TypeError("unsupported value of type %s" % type(bad).__name__)
    if len(kinds) > 1:
        raise ValueError("values of mixed kinds (%s)" % ", ".join(sorted(kinds)))
    kind = kinds.pop()
    if kind == "bytes_list":
        return Feature(bytes_list=BytesList(value=[_as_bytes(v) for v in values]))
    if kind == "int64_list":
        return Feature(int64_list=Int64List(value=[int(v) for v in values]))
    return Feature(float_list=FloatList(value=[float(v) for v in values]))


def dict_to_example(d: Mapping[str, Any]) -> Message:
    """An Example from {name: value}. Values as encode_example takes them: int/bool -> int64,
    float -> float32, bytes/str -> bytes (str as UTF-8), a list/tuple of one of those kinds,
    a numpy array (integer/bool -> int64, floating -> float32, bytes/str -> bytes; flattened),
    or a Feature message (ours or TensorFlow's). A plain empty list is a ValueError: its type is
    unknown."""
    example = Example()
    fmap = example.features.feature
    for key, value in d.items():
        if not isinstance(key, str):
            raise TypeError("feature names must be str, not %s (%r)" % (type(key).__name__, key))
        try:
            feature = _feature(value)
        except (TypeError, ValueError, OverflowError) as e:
            raise type(e)("feature %r: %s" % (key, e)) from e
        fmap[key].CopyFrom(feature)
    example.features.SetInParent()  # an empty dict still gives a Features message (0a 00)
    return example
