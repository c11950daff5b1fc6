"""Parsed Example columns -> examples as ``tfds.as_numpy`` gives them.

A :class:`Decoder` reads a batch of records with one C++ parse (the spec from spec.py), turns
each leaf's columns into one value per record (leaf_decoders.py), and nests the leaves back
into dicts along the '/' of their names. A nested Dataset (RLDS's ``steps``) becomes, with
``nested="steps"``, a list of its elements, each built from the leaves' values sliced along
their first dimension, as ``tfds.as_numpy`` iterates the nested dataset (TFDS slices the
outermost stored dimension, which under a Sequence is the Sequence's); with
``nested="columns"``, what a Sequence gives (arrays stacked over the elements).

Feature types that cannot be decoded are refused when the Decoder is made, before any record is
read (:class:`UnknownFeatureError`, naming the feature, its type and why).
"""

from __future__ import annotations

from typing import AbstractSet, Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from ..columns import Ragged, _rows
from ..errors import ExampleParseError
from ..example import feature_kinds, parse_examples
from ..spec import _KIND_DTYPE, VarLen
from .audio import missing_decoder
from .decode import is_skip
from .errors import UnknownFeatureError
from .features import Audio, Feature, Image, UnknownFeature
from .images import decode_image, unsupported_image
from .leaf_decoders import LeafDecoder, RawDecoder, element_decoder
from .spec import DatasetNode, Leaf, example_spec, leaves, output_template

__all__ = ["Decoder", "decode_image", "skipped_paths", "take_rows", "NESTED"]

NESTED = ("steps", "columns")  # how a nested Dataset is given


def skipped_paths(decoders: Optional[Mapping], paths: Set[str], prefix: str = "") -> Set[str]:
    """The leaf paths (and dict paths: everything below them) a TFDS-style ``decoders`` dict
    skips. Keys nest as the features do, or join with '/'."""
    out: Set[str] = set()
    for key, value in (decoders or {}).items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out |= skipped_paths(value, paths, path + "/")
        elif is_skip(value):
            if path not in paths and not any(p.startswith(path + "/") for p in paths):
                raise KeyError(
                    f"decoders name {path!r}, which is not a feature; the features "
                    f"are {sorted(paths)}"
                )
            out.add(path)
        else:
            raise TypeError(
                f"decoders[{path!r}]: only SkipDecoding() is supported (tfrec_fast "
                f"decodes without TensorFlow), not {type(value).__name__}"
            )
    return out


# ---- the whole example ------------------------------------------------------------------------


class Decoder:
    """Parses batches of serialized Examples of a feature tree and builds the examples.

    ``decode_images``: Images and Videos come back decoded (else as encoded bytes);
    ``skip``: leaf paths left in their stored form (TFDS's SkipDecoding); ``nested``: nested
    Datasets as lists of elements ("steps") or as stacked columns ("columns"). A leaf that
    cannot be decoded (an unknown feature type, not skipped; see :func:`refusal`) raises
    :class:`UnknownFeatureError` here, before anything is read.
    """

    def __init__(
        self,
        features: Feature,
        *,
        decode_images: bool = False,
        skip: AbstractSet[str] = frozenset(),
        nested: str = "steps",
    ):
        if nested not in NESTED:
            raise ValueError(f"nested must be one of {NESTED}, not {nested!r}")
        steps = nested == "steps"
        self.leaves = leaves(features)
        self.decoders: List[Any] = []
        self.raw: List[RawDecoder] = []
        raw_numbers = set()
        for number, leaf in enumerate(self.leaves):
            skipped = any(leaf.path == s or leaf.path.startswith(s + "/") for s in skip)
            decode = not skipped and (decode_images or not isinstance(leaf.feature, Image))
            refused = refusal(leaf, decode, steps)
            if refused is not None:
                raise UnknownFeatureError(leaf.path, leaf.feature.type_name, *refused)
            if isinstance(leaf.feature, UnknownFeature):
                raw = RawDecoder(leaf)
                self.raw.append(raw)
                self.decoders.append(raw)
                raw_numbers.add(number)
                continue
            lists = len(leaf.datasets) if steps else 0
            self.decoders.append(LeafDecoder(leaf, decode, lists))
        self.spec = example_spec(self.leaves)
        numbering = {leaf.path: i for i, leaf in enumerate(self.leaves)}
        self._build = _builder(output_template(features, numbering), steps, frozenset(raw_numbers))

    def parse(self, batch, name: str) -> Dict[str, Any]:
        """One C++ parse of a RecordBatch into the columns of every stored key."""
        spec = self.spec
        if self.raw:  # unknown features: read whatever keys they stored, typed by the data
            kinds = feature_kinds(batch, name, strict=False)
            extra = {
                k: VarLen(_KIND_DTYPE[kind] if kind is not None else "float32")
                for k, kind in kinds.items()
                if any(r.owns(k) for r in self.raw)
            }
            spec = {**spec, **extra}
        return parse_examples(batch, spec, name=name)

    def examples(
        self, columns: Mapping[str, Any], n: int, a: int = 0, b: Optional[int] = None
    ) -> list:
        """The examples of rows a..b of parsed columns holding n rows."""
        b = n if b is None else b
        if (a, b) != (0, n):
            columns = {k: _rows(c, a, b) for k, c in columns.items()}
        try:
            per_leaf = [decoder(columns, b - a) for decoder in self.decoders]
            if not per_leaf:
                return [{} for _ in range(b - a)]
            out = []
            for i, values in enumerate(zip(*per_leaf)):
                try:
                    out.append(self._build(values))
                except _Mismatch as error:
                    raise ExampleParseError(
                        str(error), record_index=i, feature=error.path
                    ) from None
            return out
        except ExampleParseError as error:  # rows are counted from a in the caller's batch
            raise ExampleParseError(
                error.detail,
                path=error.path,
                record_index=(error.record_index or 0) + a,
                feature=error.feature,
            ) from None


def refusal(leaf: Leaf, decode: bool, steps: bool) -> Optional[Tuple[str, Optional[str]]]:
    """Why ``leaf`` cannot be read as asked (an empty reason: its type is unknown), and what
    reads it instead where that is not SkipDecoding (else None); None when it can be read."""
    feature: Any = leaf.feature
    if isinstance(feature, UnknownFeature):
        if decode:
            return "", None
        if steps and leaf.datasets:
            return (
                "its raw values cannot be split into the elements of a nested Dataset",
                f"its raw values are read with nested='columns' and decoders="
                f"{{{leaf.path!r}: SkipDecoding()}}, and whole serialized Examples with "
                "dataset.records(split)",
            )
        return None  # skipped: its raw values
    if decode and isinstance(feature, Image):
        why = unsupported_image(feature.shape, feature.dtype)
        if why:
            return why, None
    if decode and isinstance(feature, Audio) and feature.lazy_decode:
        why = missing_decoder(feature)
        if why:
            return why, None
    if isinstance(leaf.serialized, dict) and leaf.sequence_rank > 1:
        return (
            "a Tensor of several unknown dimensions under two or more Sequences, which TFDS "
            "cannot decode either",
            "its stored values are not read either (SkipDecoding() does not help): whole "
            "serialized Examples are read with dataset.records(split)",
        )
    decoded = decode and element_decoder(feature) is not None
    if steps and decoded and leaf.datasets != tuple(range(len(leaf.datasets))):
        return (
            "it is decoded value by value inside a Dataset inside a Sequence, which TFDS "
            "cannot decode either; nested='columns' reads it as a Sequence",
            None,
        )
    return None


# ---- building examples from the leaves' values -----------------------------------------------


class _Mismatch(ValueError):
    """The leaves of a nested Dataset disagree on its number of elements."""

    def __init__(self, detail: str, path: str):
        super().__init__(detail)
        self.path = path


def _builder(template, steps: bool, raw: AbstractSet[int]) -> Callable[[Sequence], Any]:
    """A function making one example (nested dicts) from the leaves' values in order; nested
    Datasets as lists of elements (``steps``) or as their leaves' columns. ``raw``: the numbers
    of leaves read raw (no elements to count)."""
    if isinstance(template, int):
        return lambda values: values[template]
    if isinstance(template, DatasetNode):
        return _dataset_builder(template, steps, raw)
    keys = list(template)
    if all(isinstance(v, int) for v in template.values()):
        order = [template[k] for k in keys]
        if order == list(range(len(order))):
            return lambda values: dict(zip(keys, values))
        return lambda values: {k: values[i] for k, i in zip(keys, order)}
    parts = [(k, v if isinstance(v, int) else _builder(v, steps, raw)) for k, v in template.items()]
    return lambda values: {k: values[p] if isinstance(p, int) else p(values) for k, p in parts}


def _count(value: Any) -> int:
    """The number of elements along a value's first dimension."""
    if isinstance(value, dict):  # a skipped Tensor with its shape: {"shape", "value"}
        return _count(value["value"])
    return len(value)


def _lengths(value: Any, level: int) -> np.ndarray:
    """The lengths of a value's rows at sequence level ``level`` (0: its first dimension, one
    length; 1: the length of each row of level 0, ...), of an array, a Ragged or a skipped
    Tensor with its shape."""
    if isinstance(value, dict):
        return _lengths(value["value"], level)
    if level == 0:
        return np.array([len(value)], dtype=np.int64)
    if isinstance(value, Ragged):
        if level == 1:
            return np.diff(value.row_splits)
        return _lengths(value.values, level - 1)
    shape = np.shape(value)
    if len(shape) <= level:
        return np.zeros(0, dtype=np.int64)
    return np.full(int(np.prod(shape[:level])), shape[level], dtype=np.int64)


def _element(value: Any, t: int) -> Any:
    """Element ``t`` of a value (its row of a Ragged: own values, as a tf.RaggedTensor's)."""
    if isinstance(value, dict):
        return {k: _element(v, t) for k, v in value.items()}
    if isinstance(value, Ragged):
        return take_rows(value.values, int(value.row_splits[t]), int(value.row_splits[t + 1]))
    return value[t]


def take_rows(value: Any, a: int, b: int) -> Any:
    """Rows a..b of a value: a slice of an array or list, a Ragged holding only those rows'
    values (as slicing a tf.RaggedTensor gives), a dict of such values."""
    if isinstance(value, dict):
        return {k: take_rows(v, a, b) for k, v in value.items()}
    if isinstance(value, Ragged):
        splits = value.row_splits[a : b + 1]
        return Ragged(take_rows(value.values, int(splits[0]), int(splits[-1])), splits - splits[0])
    return value[a:b]


def _dataset_builder(
    node: DatasetNode, steps: bool, raw: AbstractSet[int]
) -> Callable[[Sequence], Any]:
    """A nested Dataset: its leaves must agree on its number of elements. With ``steps``, its
    elements: the leaves under it sliced along their first dimension (as
    tf.data.Dataset.from_tensor_slices does), each element built by the inner template; else the
    leaves' columns as they are, checked at the Dataset's own sequence level (below the
    Datasets holding it, whose elements are not sliced apart)."""
    inner = _builder(node.inner, steps, raw)
    numbers = node.leaves
    counted = [i for i in numbers if i not in raw]

    def mismatch(counts) -> _Mismatch:
        return _Mismatch(
            f"the features of nested Dataset {node.path!r} hold different "
            f"numbers of elements: {sorted(counts)}",
            node.path,
        )

    def build(values: Sequence) -> list:
        if not numbers:
            return []
        counts = {_count(values[i]) for i in numbers}
        if len(counts) != 1:
            raise mismatch(counts)
        sliced = list(values)
        out = []
        for t in range(counts.pop()):
            for i in numbers:
                sliced[i] = _element(values[i], t)
            out.append(inner(sliced))
        return out

    def columns(values: Sequence) -> Any:
        if counted:
            first = _lengths(values[counted[0]], node.depth)
            for i in counted[1:]:
                other = _lengths(values[i], node.depth)
                if not np.array_equal(first, other):
                    if node.depth == 0:
                        raise mismatch({int(first[0]), int(other[0])})
                    raise _Mismatch(
                        f"the features of nested Dataset {node.path!r} hold "
                        "different numbers of elements in some of the elements "
                        "holding it",
                        node.path,
                    )
        return inner(values)

    return build if steps else columns
