"""The TFDS feature tree (features.json) and how each feature turns the Example columns of one
record into what ``tfds.as_numpy`` gives.

A node knows the flattened Example features it reads (``name -> list kind``) and decodes them:
``decode(row)`` where ``row(name)`` returns the feature's values for the record (a numpy array,
or a list of bytes). Nested names are joined with ``/``, as TFDS writes them.
"""

from __future__ import annotations

import io
import zlib
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..errors import ExampleParseError

Row = Callable[[str], Any]
_INT, _FLOAT, _BYTES = "int64", "float32", "bytes"


class UnknownFeatureError(ValueError):
    """features.json names a feature type tfrec_fast.tfds cannot decode. The raw Example
    values stay readable: Split.raw(i) or tfrec_fast.parse_example."""


def _list_kind(dtype: np.dtype) -> str:
    """The Example list TFDS stores a numeric/bool/string dtype in."""
    if dtype.kind in "iub":
        return _INT
    if dtype.kind == "f":
        return _FLOAT
    return _BYTES


def _shape(data: Dict[str, Any]) -> Tuple[int, ...]:
    return tuple(int(d) for d in data.get("shape", {}).get("dimensions", []))


def _dtype(name: str) -> np.dtype:
    return np.dtype(object) if name == "string" else np.dtype(name)


def _reshape(values: np.ndarray, shape: Tuple[int, ...], name: str) -> np.ndarray:
    """``values`` in ``shape`` (one -1 allowed), or a clear error naming the feature."""
    try:
        return values.reshape(shape)
    except ValueError:
        raise ExampleParseError(f"holds {values.size} values, which do not fit shape {shape}",
                                path="<records>", record_index=0, feature=name) from None


class Feature:
    name: str

    def specs(self) -> Dict[str, str]:
        raise NotImplementedError

    def decode(self, row: Row, decode_images: bool) -> Any:
        raise NotImplementedError

    def decode_steps(self, row: Row, decode_images: bool) -> Any:
        """Inside a Sequence: every step of the record, stacked on a leading dimension."""
        raise UnknownFeatureError(f"{self.name}: a Sequence of {type(self).__name__} is not "
                                  "supported")


class Tensor(Feature):
    """tfds.features.Tensor (and the dtype shorthands, Scalar): values in a list of the
    matching kind, or raw bytes (``encoding: bytes``/``zlib``)."""

    def __init__(self, name: str, data: Dict[str, Any]):
        self.name = name
        self.shape = _shape(data)
        self.dtype = _dtype(data.get("dtype", "float32"))
        self.encoding = data.get("encoding", "none")
        if self.encoding not in ("none", "bytes", "zlib"):
            raise UnknownFeatureError(f"{name}: Tensor encoding {self.encoding!r} is unknown")

    def specs(self) -> Dict[str, str]:
        return {self.name: _BYTES if self.encoding != "none" else _list_kind(self.dtype)}

    def _array(self, values, shape) -> np.ndarray:
        if self.encoding != "none":
            data = b"".join(bytes(v) for v in values)
            if self.encoding == "zlib":
                data = zlib.decompress(data)
            return _reshape(np.frombuffer(data, self.dtype).copy(), shape, self.name)
        if self.dtype == object:
            array = np.empty(len(values), object)
            array[:] = [bytes(v) for v in values]
        else:
            array = np.asarray(values).astype(self.dtype)
        return _reshape(array, shape, self.name)

    def decode(self, row: Row, decode_images: bool) -> Any:
        array = self._array(row(self.name), self.shape)
        return array[()] if array.ndim == 0 else array  # a numpy scalar (bytes), as TFDS

    def decode_steps(self, row: Row, decode_images: bool) -> Any:
        return self._array(row(self.name), (-1,) + self.shape)


class ClassLabel(Tensor):
    """tfds.features.ClassLabel: an int64 per record, with ``names`` from the labels file."""

    def __init__(self, name: str, data: Dict[str, Any], names: Optional[List[str]]):
        super().__init__(name, {"dtype": "int64", "shape": {}})
        self.num_classes = int(data.get("numClasses", len(names or [])))
        self.names = names

    def int2str(self, value: int) -> str:
        if self.names is None:
            return str(value)
        return self.names[value]


class Text(Tensor):
    """tfds.features.Text: one bytes value (as_numpy gives bytes)."""

    def __init__(self, name: str):
        super().__init__(name, {"dtype": "string", "shape": {}})


class BBox(Tensor):
    """tfds.features.BBoxFeature: float32 [4] (ymin, xmin, ymax, xmax)."""

    def __init__(self, name: str, data: Dict[str, Any]):
        super().__init__(name, {"dtype": data.get("dtype", "float32"), "shape": {
            "dimensions": ["4"]}})


class Image(Feature):
    """tfds.features.Image: one encoded image (PNG/JPEG); decoded with Pillow on request."""

    def __init__(self, name: str, data: Dict[str, Any]):
        self.name = name
        self.shape = _shape(data)
        self.dtype = np.dtype(data.get("dtype", "uint8"))

    def specs(self) -> Dict[str, str]:
        return {self.name: _BYTES}

    def _one(self, encoded: bytes, decode_images: bool):
        if not decode_images:
            return encoded
        try:
            from PIL import Image as PILImage
        except ImportError:
            raise ImportError("decode_images=True needs Pillow: pip install pillow") from None
        with PILImage.open(io.BytesIO(encoded)) as img:
            array = np.asarray(img).astype(self.dtype, copy=False)
        if array.ndim == 2:
            array = array[:, :, None]
        channels = self.shape[-1] if self.shape else -1
        if channels > 0 and array.shape[-1] != channels:
            raise ExampleParseError(f"decodes to {array.shape}, the feature declares "
                                    f"{self.shape}", path="<records>", record_index=0,
                                    feature=self.name)
        return array

    def decode(self, row: Row, decode_images: bool) -> Any:
        values = row(self.name)
        if len(values) != 1:
            raise ExampleParseError(f"holds {len(values)} images, expected 1", path="<records>",
                                    record_index=0, feature=self.name)
        return self._one(bytes(values[0]), decode_images)

    def decode_steps(self, row: Row, decode_images: bool) -> Any:
        frames = [self._one(bytes(v), decode_images) for v in row(self.name)]
        if not decode_images:
            array = np.empty(len(frames), object)
            array[:] = frames
            return array
        if not frames:
            return np.zeros((0,) + tuple(max(d, 0) for d in self.shape), self.dtype)
        return np.stack(frames)


class Video(Feature):
    """tfds.features.Video: a Sequence of encoded frames, [T, H, W, C] when decoded."""

    def __init__(self, name: str, data: Dict[str, Any]):
        self.name = name
        self.frame = Image(name, {"shape": {"dimensions": [str(d) for d in _shape(data)[1:]]},
                                  "dtype": data.get("dtype", "uint8")})

    def specs(self) -> Dict[str, str]:
        return {self.name: _BYTES}

    def decode(self, row: Row, decode_images: bool) -> Any:
        return self.frame.decode_steps(row, decode_images)


class Sequence(Feature):
    """tfds.features.Sequence: its feature with a leading dimension (a Sequence of a dict is a
    dict of such arrays)."""

    def __init__(self, name: str, feature: Feature, length: int):
        self.name = name
        self.feature = feature
        self.length = length

    def specs(self) -> Dict[str, str]:
        return self.feature.specs()

    def decode(self, row: Row, decode_images: bool) -> Any:
        return self.feature.decode_steps(row, decode_images)


class FeaturesDict(Feature):
    def __init__(self, name: str, children: Dict[str, Feature]):
        self.name = name
        self.children = children

    def specs(self) -> Dict[str, str]:
        out: Dict[str, str] = {}
        for child in self.children.values():
            out.update(child.specs())
        return out

    def decode(self, row: Row, decode_images: bool) -> Any:
        return {key: child.decode(row, decode_images) for key, child in self.children.items()}

    def decode_steps(self, row: Row, decode_images: bool) -> Any:
        return {key: child.decode_steps(row, decode_images)
                for key, child in self.children.items()}

    def leaves(self):
        for child in self.children.values():
            if isinstance(child, FeaturesDict):
                yield from child.leaves()
            elif isinstance(child, Sequence) and isinstance(child.feature, FeaturesDict):
                yield from child.feature.leaves()
            else:
                yield child


class Unknown(Feature):
    """A feature type this module does not know: reading it is an error naming the type."""

    def __init__(self, name: str, type_name: str):
        self.name = name
        self.type_name = type_name

    def specs(self) -> Dict[str, str]:
        return {}

    def decode(self, row: Row, decode_images: bool) -> Any:
        raise UnknownFeatureError(
            f"feature {self.name!r} has type {self.type_name}, which tfrec_fast.tfds cannot "
            "decode; read the record's raw values with Split.raw(i)")

    decode_steps = decode


def parse_tree(data: Dict[str, Any], labels: Callable[[str], Optional[List[str]]],
               name: str = "") -> Feature:
    """features.json (as a dict) -> the feature tree. ``labels(name)`` gives a ClassLabel's
    names (from ``{name with / as -}.labels.txt``) or None."""
    type_name = data.get("pythonClassName", "").rsplit(".", 1)[-1]
    if "featuresDict" in data:
        features = data["featuresDict"].get("features", {})
        return FeaturesDict(name, {key: parse_tree(child, labels, _join(name, key))
                                   for key, child in features.items()})
    if "sequence" in data:
        seq = data["sequence"]
        return Sequence(name, parse_tree(seq["feature"], labels, name),
                        int(seq.get("length", -1)))
    if "tensor" in data:
        return Tensor(name, data["tensor"])
    if "classLabel" in data:
        return ClassLabel(name, data["classLabel"], labels(name))
    if "text" in data:
        return Text(name)
    if "boundingBox" in data:
        return BBox(name, data["boundingBox"])
    if "image" in data:
        return Image(name, data["image"])
    if "video" in data:
        return Video(name, data["video"])
    return Unknown(name, type_name or next(iter(data), "?"))


def _join(prefix: str, key: str) -> str:
    return f"{prefix}/{key}" if prefix else key
