"""From the feature tree to the Example keys TFDS wrote and the tfrec_fast spec that reads them.

TFDS flattens the tree into tf.train.Example features named by the path of dict keys joined by
'/' ("objects/bbox"); a Sequence adds a leading dimension to everything under it. How a leaf is
stored (its *serialized info*) follows TFDS's ``get_serialized_info``:

- a Tensor with no encoding: its values in one list (ints and bools as int64, floats as
  float32, strings as bytes), read with FixedLen when the shape is known, VarLen when one
  dimension varies;
- a Tensor with encoding "bytes"/"zlib" and an Image: one bytes value per element; a Tensor
  whose shape has two or more unknown dimensions also stores its shape, under "<key>/shape" and
  "<key>/value";
- under two or more Sequences (ragged): "<key>/ragged_flat_values" plus one
  "<key>/ragged_row_lengths_<k>" per inner sequence level.

A nested Dataset (``tfds.features.Dataset``, RLDS's steps) is stored as a Sequence is: each
leaf records which of its sequence levels are Datasets (``Leaf.datasets``), and
:func:`output_template` marks the Dataset nodes, where the decoder checks that the leaves agree
on the number of elements and makes a list of elements (or keeps the columns).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from ..example import FixedLen, VarLen
from .errors import DatasetInfoError
from .features import (
    STRING,
    Audio,
    Dataset,
    Feature,
    FeaturesDict,
    Image,
    Sequence,
    Tensor,
    UnknownFeature,
    dtype_name,
)

__all__ = ["TensorInfo", "Leaf", "DatasetNode", "leaves", "output_template", "example_spec"]


@dataclass(frozen=True)
class TensorInfo:
    """How one value is stored: its shape (with the Sequence dimensions in front), numpy dtype,
    number of Sequences around it, and the default TFDS reads when an optional one is missing."""

    shape: Tuple[Optional[int], ...]
    dtype: np.dtype
    sequence_rank: int = 0
    default: Any = None

    @property
    def inner_shape(self) -> Tuple[Optional[int], ...]:
        """The shape of one element (below the Sequence dimensions)."""
        return self.shape[self.sequence_rank :]


Serialized = Union[TensorInfo, Dict[str, TensorInfo]]


@dataclass(frozen=True)
class Leaf:
    """A feature the tree ends in, at ``path`` (its Example key, and its place in the output)."""

    path: str
    feature: Feature
    serialized: Optional[Serialized]  # None for an UnknownFeature (its keys are not known)
    datasets: Tuple[int, ...] = ()  # which sequence levels (0: outermost) are Datasets

    @property
    def sequence_rank(self) -> int:
        info = self.serialized
        if isinstance(info, dict):
            info = info["value"]
        return 0 if info is None else info.sequence_rank

    @property
    def length(self) -> Optional[int]:
        """The outer Sequence's fixed length, if the leaf is under one that has it."""
        info = self.serialized["value"] if isinstance(self.serialized, dict) else self.serialized
        return info.shape[0] if info is not None and info.sequence_rank else None


def _optional_default(feature: Tensor) -> Any:
    """The value TFDS reads for a missing optional Tensor (tensor_feature._default_value)."""
    if not feature.optional:
        return None
    dtype = feature.dtype
    if dtype == STRING:
        value: Any = b""
    elif dtype.kind in "iu":
        value = np.iinfo(dtype).min
    elif dtype.kind == "f":
        value = np.finfo(dtype).min
    elif dtype.kind == "b":
        value = False
    else:
        return None
    return value if not feature.shape else np.full(feature.shape, value, dtype=dtype)


def serialized_info(feature: Feature, where: str) -> Optional[Serialized]:
    """TFDS's get_serialized_info for a leaf (no Sequence around it yet)."""
    if isinstance(feature, Image) or (isinstance(feature, Audio) and feature.lazy_decode):
        return TensorInfo((), STRING)
    if isinstance(feature, Tensor):
        default = _optional_default(feature)
        dynamic = feature.shape.count(None) > 1
        if feature.encoding not in ("none", "bytes", "zlib"):
            raise DatasetInfoError(f"unknown Tensor encoding {feature.encoding!r}", where=where)
        if feature.encoding != "none":
            value = TensorInfo((), STRING, default=default)
        elif dynamic:
            raise DatasetInfoError(
                f"a Tensor of shape {feature.shape} without encoding (TFDS cannot write it: "
                "two unknown dimensions need encoding='bytes' or 'zlib')",
                where=where,
            )
        else:
            value = TensorInfo(feature.shape, feature.dtype, default=default)
        if dynamic:
            return {"shape": TensorInfo((len(feature.shape),), np.dtype(np.int32)), "value": value}
        return value
    if isinstance(feature, UnknownFeature):
        return None
    raise DatasetInfoError(f"{feature.type_name} cannot be a leaf of the tree", where=where)


def _in_sequence(info: Optional[Serialized], length: Optional[int]) -> Optional[Serialized]:
    if info is None:
        return None
    if isinstance(info, dict):
        return {
            k: replace(v, shape=(length,) + v.shape, sequence_rank=v.sequence_rank + 1)
            for k, v in info.items()
        }
    return replace(info, shape=(length,) + info.shape, sequence_rank=info.sequence_rank + 1)


def leaves(features: Feature) -> List[Leaf]:
    """The leaves of the tree, in the order of its dicts (each dict's keys as listed)."""
    if not isinstance(features, (FeaturesDict, Sequence)):
        raise DatasetInfoError(
            "the top feature of a dataset is a FeaturesDict (or a Sequence "
            f"of one), not {features.type_name}",
            where="features.json",
        )
    out: List[Leaf] = []
    _collect(features, "", [], out)
    return out


def _collect(feature: Feature, path: str, levels: List[Sequence], out: List[Leaf]) -> None:
    if isinstance(feature, FeaturesDict):
        for key, child in feature.items():
            _collect(child, f"{path}/{key}" if path else key, levels, out)
    elif isinstance(feature, Sequence):
        _collect(feature.feature, path, levels + [feature], out)
    else:
        info = serialized_info(feature, f"features.json: {path}")
        for level in reversed(levels):
            info = _in_sequence(info, level.length)
        datasets = tuple(k for k, level in enumerate(levels) if isinstance(level, Dataset))
        out.append(Leaf(path, feature, info, datasets))


@dataclass(frozen=True)
class DatasetNode:
    """Where the output holds a nested Dataset: ``inner`` is the template of one element,
    ``leaves`` the numbers of the leaves under it (their values are sliced per element), and
    ``depth`` how many Datasets hold it (the sequence level of its own elements in the values
    of its leaves, when no Dataset above it slices them)."""

    path: str
    inner: Any
    leaves: Tuple[int, ...]
    depth: int = 0


def output_template(features: Feature, numbering: Dict[str, int]) -> Any:
    """The nesting of an example: a dict per FeaturesDict (Sequences add no level), each leaf
    replaced by its number in ``numbering`` (path -> index), and each Dataset by a
    :class:`DatasetNode`."""
    if isinstance(features, Sequence) and not isinstance(features, Dataset):
        return output_template(features.feature, numbering)
    if isinstance(features, FeaturesDict):
        return _template(features, "", numbering, 0)
    raise DatasetInfoError("the top feature of a dataset is a FeaturesDict", where="features.json")


def _template(feature: Feature, path: str, numbering: Dict[str, int], depth: int) -> Any:
    if isinstance(feature, Dataset):
        inner = _template(feature.feature, path, numbering, depth + 1)
        return DatasetNode(path, inner, tuple(sorted(_numbers(inner))), depth)
    if isinstance(feature, Sequence):
        return _template(feature.feature, path, numbering, depth)
    if isinstance(feature, FeaturesDict):
        return {
            key: _template(child, f"{path}/{key}" if path else key, numbering, depth)
            for key, child in feature.items()
        }
    return numbering[path]


def _numbers(template: Any) -> List[int]:
    """The leaf numbers in a template."""
    if isinstance(template, int):
        return [template]
    if isinstance(template, DatasetNode):
        return list(template.leaves)
    return [n for value in template.values() for n in _numbers(value)]


# ---- Example keys -> tfrec_fast specs ---------------------------------------------------------


def list_kind(dtype: np.dtype, where: str) -> str:
    """The tf.train.Feature list a dtype is stored in."""
    if dtype == STRING:
        return "bytes"
    if dtype.kind in "iub":
        return "int64"
    if dtype.kind == "f" or dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        return "float32"
    raise DatasetInfoError(
        f"dtype {dtype_name(dtype)} cannot be stored in a tf.train.Example "
        "(TFDS stores ints, floats and strings only)",
        where=where,
    )


def ragged_keys(key: str, info: TensorInfo) -> Tuple[str, List[str]]:
    """(flat values key, row length keys outermost first) of a value under >= 2 Sequences."""
    return (
        f"{key}/ragged_flat_values",
        [f"{key}/ragged_row_lengths_{k}" for k in range(info.sequence_rank - 1)],
    )


def value_keys(leaf: Leaf) -> Dict[str, Tuple[str, Any]]:
    """{role: (Example key, its info)}: role "" for a plain leaf, "shape"/"value" for a Tensor
    that stores its shape."""
    if isinstance(leaf.serialized, dict):
        return {role: (f"{leaf.path}/{role}", info) for role, info in leaf.serialized.items()}
    return {"": (leaf.path, leaf.serialized)}


def example_spec(all_leaves: List[Leaf]) -> Dict[str, Union[FixedLen, VarLen]]:
    """The tfrec_fast spec reading every stored key of these leaves (unknown ones excepted)."""
    spec: Dict[str, Union[FixedLen, VarLen]] = {}
    for leaf in all_leaves:
        if leaf.serialized is None:
            continue
        for key, info in value_keys(leaf).values():
            spec.update(_key_spec(key, info))
    return spec


def _key_spec(key: str, info: TensorInfo) -> Dict[str, Union[FixedLen, VarLen]]:
    where = f"features.json: {key}"
    kind = list_kind(info.dtype, where)
    if info.sequence_rank > 1:
        if None in info.inner_shape:
            raise DatasetInfoError(
                f"a ragged value's elements need a known shape, not {info.inner_shape}", where=where
            )
        flat, lengths = ragged_keys(key, info)
        return {flat: VarLen(kind), **{k: VarLen("int64") for k in lengths}}
    unknown = info.shape.count(None)
    if unknown == 0:
        return {key: FixedLen(info.shape, kind, _spec_default(info, kind))}
    if unknown == 1:
        return {key: VarLen(kind)}
    raise DatasetInfoError(
        f"shape {info.shape} has several unknown dimensions (TFDS stores those as encoded bytes)",
        where=where,
    )


def _spec_default(info: TensorInfo, kind: str) -> Any:
    """An optional feature's default in the list kind it is read as (TensorFlow casts the
    parsed default, as numpy does here: float64's min becomes -inf in float32)."""
    if info.default is None:
        return None
    if kind == "bytes":
        return info.default
    with np.errstate(over="ignore"):
        return np.asarray(info.default).astype(np.int64 if kind == "int64" else np.float32)
