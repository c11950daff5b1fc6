"""The feature tree of a TFDS dataset, read from its features.json (TensorFlow never imported).

features.json is TFDS's ``Feature`` protobuf in JSON: each node names its Python class
(``pythonClassName``) and holds one typed content field (``image``, ``tensor``, ``sequence``,
...). Older files hold ``{"type": ..., "content": ...}`` instead; both are read. Each class here
mirrors the TFDS feature connector of the same name and keeps what decoding needs: output shape
and dtype, encodings, ClassLabel names. A class this module does not know becomes an
:class:`UnknownFeature`, which decodes only as raw values (see tfrec_fast.tfds.decode).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

import numpy as np
from numpy.typing import DTypeLike

from .errors import DatasetInfoError

__all__ = [
    "Feature",
    "Tensor",
    "Scalar",
    "ClassLabel",
    "Text",
    "BBoxFeature",
    "Audio",
    "Image",
    "LabeledImage",
    "Sequence",
    "Dataset",
    "Video",
    "FeaturesDict",
    "Translation",
    "TranslationVariableLanguages",
    "UnknownFeature",
    "from_json",
]

Shape = Tuple[Optional[int], ...]
STRING = np.dtype(object)  # TFDS's "string" dtype: bytes values


class Feature:
    """A node of the feature tree. ``type_name`` is the TFDS class name ("Image", ...)."""

    type_name = "Feature"

    def __init__(self, description: str = ""):
        self.description = description

    def _repr_fields(self) -> str:
        return ""

    def __repr__(self) -> str:
        return f"{self.type_name}({self._repr_fields()})"


class Tensor(Feature):
    """A tensor of ``shape`` (None for a dimension that varies) and numpy ``dtype``.

    ``encoding`` is TFDS's: "none" (values in an int64/float list: ints and bools as int64,
    floats as float32), or "bytes"/"zlib" (the raw array as one bytes value, zlib-compressed or
    not). ``optional`` tensors may be missing from an Example (then TFDS's default is read).
    """

    type_name = "Tensor"

    def __init__(
        self,
        shape: Shape,
        dtype: DTypeLike,
        encoding: str = "none",
        optional: bool = False,
        description: str = "",
    ):
        super().__init__(description)
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.encoding = encoding
        self.optional = optional

    def _repr_fields(self) -> str:
        extra = "" if self.encoding == "none" else f", encoding={self.encoding}"
        return f"shape={self.shape}, dtype={dtype_name(self.dtype)}{extra}"


class Scalar(Tensor):
    """A Tensor of shape () (TFDS's Scalar)."""

    type_name = "Scalar"


class ClassLabel(Tensor):
    """An int64 label; ``names`` from the dataset's ``<feature>.labels.txt`` when it has one."""

    type_name = "ClassLabel"

    def __init__(
        self, num_classes: Optional[int], names: Optional[List[str]] = None, description: str = ""
    ):
        super().__init__((), np.int64, description=description)
        self.num_classes = num_classes if num_classes is not None or names is None else len(names)
        self._names = names

    @property
    def names(self) -> List[str]:
        if self._names:
            return list(self._names)
        return [str(i) for i in range(self.num_classes or 0)]

    def int2str(self, value: int) -> str:
        if not 0 <= int(value) < (self.num_classes or 0):
            raise ValueError(f"invalid class label {value} (num_classes={self.num_classes})")
        return self.names[int(value)]

    def str2int(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise ValueError(f"unknown class name {name!r}: the names are {self.names}") from None

    def _repr_fields(self) -> str:
        return f"shape=(), dtype=int64, num_classes={self.num_classes}"


class Text(Tensor):
    """A string: bytes (UTF-8, as TFDS gives it). With TFDS's deprecated text encoder
    (``encoded``), the int64 token ids the encoder made, shape (None,), as TFDS gives them
    (the encoder's vocabulary files beside features.json are not read)."""

    type_name = "Text"

    def __init__(self, description: str = "", *, encoded: bool = False):
        if encoded:
            super().__init__((None,), np.int64, description=description)
        else:
            super().__init__((), STRING, description=description)
        self.encoded = encoded

    def _repr_fields(self) -> str:
        if self.encoded:
            return "shape=(None,), dtype=int64, encoder=True"
        return "shape=(), dtype=string"


class BBoxFeature(Tensor):
    """A bounding box: float32 [4] (ymin, xmin, ymax, xmax for the default format)."""

    type_name = "BBoxFeature"

    def __init__(self, bbox_format: Optional[str] = None, description: str = ""):
        super().__init__((4,), np.float32, description=description)
        self.bbox_format = bbox_format


class Audio(Tensor):
    """Audio samples of ``shape`` (length,) or (length, channels) and ``dtype``. TFDS stores
    them either as a tensor (``encoding`` as a Tensor's), or, with ``lazy_decode``, as the
    audio file itself (``file_format``: "wav", "flac", ...), decoded when read."""

    type_name = "Audio"

    def __init__(
        self,
        shape: Shape,
        dtype: DTypeLike,
        encoding: str = "none",
        sample_rate: Optional[int] = None,
        description: str = "",
        *,
        lazy_decode: bool = False,
        file_format: Optional[str] = None,
    ):
        super().__init__(shape, dtype, encoding, description=description)
        self.sample_rate = sample_rate
        self.lazy_decode = lazy_decode
        self.file_format = file_format

    @property
    def channels(self) -> int:
        return self.shape[1] if len(self.shape) > 1 and self.shape[1] else 1

    def _repr_fields(self) -> str:
        lazy = f", lazy_decode=True, file_format={self.file_format}" if self.lazy_decode else ""
        return super()._repr_fields() + lazy


class Image(Feature):
    """An encoded image (PNG, JPEG, ...): the bytes, or decoded to ``dtype`` of ``shape``."""

    type_name = "Image"

    def __init__(
        self,
        shape: Shape = (None, None, 3),
        dtype: DTypeLike = np.uint8,
        encoding_format: Optional[str] = None,
        description: str = "",
    ):
        super().__init__(description)
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.encoding_format = encoding_format

    def _repr_fields(self) -> str:
        return f"shape={self.shape}, dtype={self.dtype.name}"


class LabeledImage(Image):
    """A single-channel image whose pixel values are class labels (with ``names``)."""

    type_name = "LabeledImage"

    def __init__(self, labels: ClassLabel, **kwargs):
        super().__init__(**kwargs)
        self.labels = labels

    @property
    def num_classes(self) -> Optional[int]:
        return self.labels.num_classes

    @property
    def names(self) -> List[str]:
        return self.labels.names


class Sequence(Feature):
    """Any number (or exactly ``length``) of ``feature``; a Sequence of a dict reads as a dict
    of arrays with a leading sequence dimension."""

    type_name = "Sequence"

    def __init__(self, feature: Feature, length: Optional[int] = None, description: str = ""):
        super().__init__(description)
        self.feature = feature
        self.length = length

    def __getitem__(self, key: str) -> Feature:
        if not isinstance(self.feature, FeaturesDict):
            raise TypeError(f"{self!r} holds no dict")
        return self.feature[key]

    def _repr_fields(self) -> str:
        length = "" if self.length is None else f", length={self.length}"
        return f"{self.feature!r}{length}"


class Dataset(Sequence):
    """A nested dataset (``tfds.features.Dataset``): RLDS's ``steps``. Stored as a Sequence
    of ``feature``; read as a list of its elements (as ``tfds.as_numpy`` iterates the nested
    dataset), or with ``nested="columns"`` as a Sequence reads (arrays stacked over the
    elements)."""

    type_name = "Dataset"


class Video(Sequence):
    """Frames: a Sequence of Images, decoded to [frames, height, width, channels]."""

    type_name = "Video"

    @property
    def shape(self) -> Shape:
        frames: Any = self.feature  # an Image
        return (self.length,) + frames.shape

    @property
    def dtype(self) -> np.dtype:
        frames: Any = self.feature  # an Image
        return frames.dtype

    def _repr_fields(self) -> str:
        return f"shape={self.shape}, dtype={self.dtype.name}"


class FeaturesDict(Feature, Mapping):
    """Named features; examples are dicts with these keys (nested dicts for nested ones)."""

    type_name = "FeaturesDict"

    def __init__(self, features: Dict[str, Feature], description: str = ""):
        super().__init__(description)
        self._features = dict(features)

    def __getitem__(self, key: str) -> Feature:
        if "/" in key and key not in self._features:  # "a/b" reaches into nested dicts
            head, rest = key.split("/", 1)
            nested: Any = self._features[head]  # a FeaturesDict, or KeyError from it
            return nested[rest]
        return self._features[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._features)

    def __len__(self) -> int:
        return len(self._features)

    def __repr__(self) -> str:
        lines = [f"{self.type_name}({{"]
        for key in sorted(self._features):
            inner = repr(self._features[key]).replace("\n", "\n    ")
            lines.append(f"    {key!r}: {inner},")
        return "\n".join(lines + ["})"])


class Translation(FeaturesDict):
    """One Text per language: {language: text}."""

    type_name = "Translation"

    @property
    def languages(self) -> List[str]:
        return sorted(self)


class TranslationVariableLanguages(Sequence):
    """Any languages per example: {"language": [...], "translation": [...]}, sorted by language."""

    type_name = "TranslationVariableLanguages"


class UnknownFeature(Feature):
    """A feature class tfrec_fast.tfds cannot decode: its values are only available raw."""

    def __init__(self, class_name: str, content: Any, description: str = ""):
        super().__init__(description)
        self.class_name = class_name
        self.content = content

    @property
    def type_name(self) -> str:  # type: ignore[override]
        return self.class_name

    def __repr__(self) -> str:
        return f"UnknownFeature({self.class_name!r})"


# ---- features.json -> tree --------------------------------------------------------------------


def dtype_name(dtype: np.dtype) -> str:
    return "string" if dtype == STRING else dtype.name


def parse_dtype(name: str, where: str) -> np.dtype:
    """A TFDS dtype name ("uint8", "string", "bfloat16", ...) -> numpy dtype."""
    if name == "string":
        return STRING
    try:
        return np.dtype(name)
    except TypeError:
        pass
    try:  # bfloat16 and friends, where ml_dtypes (a TensorFlow/JAX dependency) is installed
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    except (ImportError, AttributeError, TypeError):
        raise DatasetInfoError(
            f"dtype {name!r} is not a numpy dtype (for bfloat16 and the "
            "float8 types install ml_dtypes)",
            where=where,
        ) from None


def _field(content: Mapping, *names: str, default=None):
    """The first of ``names`` present: proto JSON uses camelCase, legacy JSON snake_case."""
    for name in names:
        if name in content:
            return content[name]
    return default


def _shape(value, where: str) -> Shape:
    if value is None:
        return ()
    dims = value.get("dimensions", []) if isinstance(value, Mapping) else value
    try:  # proto JSON writes int64 as strings; -1 (or null) is an unknown dimension
        return tuple(None if d is None or int(d) < 0 else int(d) for d in dims)
    except (TypeError, ValueError):
        raise DatasetInfoError(f"bad shape {value!r}", where=where) from None


def _length(value) -> Optional[int]:
    return None if value is None or int(value) < 0 else int(value)


# The TFDS classes read here, by their short name (the module part of pythonClassName is the
# one TFDS had when the dataset was built; classes move between modules over TFDS versions).
_TFDS_PREFIX = "tensorflow_datasets."


def _tensor(content, where, description, cls=Tensor):
    return cls(
        _shape(_field(content, "shape"), where),
        parse_dtype(_field(content, "dtype", default="float32"), where),
        str(_field(content, "encoding", default="none") or "none").lower(),
        bool(_field(content, "optional", default=False)),
        description,
    )


def _class_label(content, where, description):
    names = _field(content, "names")
    num_classes = _field(content, "numClasses", "num_classes")
    return ClassLabel(
        None if num_classes is None else int(num_classes),
        list(names) if names else None,
        description,
    )


def _image_kwargs(content, where, description):
    return dict(
        shape=_shape(_field(content, "shape"), where) or (None, None, 3),
        dtype=parse_dtype(_field(content, "dtype", default="uint8"), where),
        encoding_format=_field(content, "encodingFormat", "encoding_format") or None,
        description=description,
    )


def _image(content, where, description):
    return Image(**_image_kwargs(content, where, description))


def _labeled_image(content, where, description):
    label = _field(content, "label", default={}) or {}
    labels = _field(content, "labels")
    if isinstance(labels, list):
        classes = ClassLabel(None, labels)
    else:
        num = _field(label, "numClasses", "num_classes", default=labels)
        classes = ClassLabel(int(num) if num else None)
    return LabeledImage(classes, **_image_kwargs(content, where, description))


def _video(content, where, description):
    shape = _shape(_field(content, "shape"), where)
    if shape and len(shape) != 4:
        raise DatasetInfoError(f"a Video's shape has 4 dimensions, not {shape}", where=where)
    frame = Image(
        shape=shape[1:] if shape else (None, None, 3),
        dtype=parse_dtype(_field(content, "dtype", default="uint8"), where),
        encoding_format=_field(content, "encodingFormat", "encoding_format") or "png",
    )
    return Video(frame, shape[0] if shape else None, description)


def _audio(content, where, description):
    rate = _field(content, "sampleRate", "sample_rate")
    shape = _shape(_field(content, "shape"), where) or (None,)
    if len(shape) > 2:
        raise DatasetInfoError(
            f"an Audio's shape is (length,) or (length, channels), not {shape}", where=where
        )
    return Audio(
        shape,
        parse_dtype(_field(content, "dtype", default="int64"), where),
        str(_field(content, "encoding", default="none") or "none").lower(),
        None if rate is None else int(rate),
        description,
        lazy_decode=bool(_field(content, "lazyDecode", "lazy_decode", default=False)),
        file_format=_field(content, "fileFormat", "file_format") or None,
    )


def _bbox(content, where, description):
    return BBoxFeature(_field(content, "bboxFormat", "bbox_format"), description)


def _text(content, where, description):
    encoded = isinstance(content, Mapping) and bool(_field(content, "useEncoder", "use_encoder"))
    return Text(description, encoded=encoded)  # encoded: TFDS's deprecated text encoders


def _sequence(content, where, description, cls=Sequence):
    inner = from_json(content["feature"], f"{where}/[{cls.type_name.lower()}]")
    return cls(inner, _length(_field(content, "length")), description)


def _features_dict(content, where, description):
    children = content.get("features", content) if isinstance(content, Mapping) else {}
    return FeaturesDict(
        {key: from_json(value, f"{where}/{key}") for key, value in children.items()}, description
    )


def _translation(content, where, description):
    languages = list(_field(content, "languages", default=[]) or [])
    if _field(content, "variableLanguagesPerExample", "variable_languages_per_example"):
        return TranslationVariableLanguages(
            FeaturesDict({"language": Text(), "translation": Text()}), None, description
        )
    return Translation({lang: Text() for lang in languages}, description)


def _translation_variable(content, where, description):
    return TranslationVariableLanguages(
        FeaturesDict({"language": Text(), "translation": Text()}), None, description
    )


_READERS: Dict[str, Callable[[Any, str, str], Optional[Feature]]] = {
    "Tensor": _tensor,
    "Scalar": lambda content, where, description: _tensor(content, where, description, Scalar),
    "ClassLabel": _class_label,
    "Text": _text,
    "BBoxFeature": _bbox,
    "Audio": _audio,
    "Image": _image,
    "LabeledImage": _labeled_image,
    "Video": _video,
    "Sequence": _sequence,
    "Dataset": lambda content, where, description: _sequence(content, where, description, Dataset),
    "FeaturesDict": _features_dict,
    "Translation": _translation,
    "TranslationVariableLanguages": _translation_variable,
}


def from_json(node: Any, where: str = "features.json") -> Feature:
    """One node of features.json (either format) -> a Feature. ``where`` names the node in
    errors (the file, then the path of keys)."""
    if not isinstance(node, Mapping):
        raise DatasetInfoError(f"a feature is a JSON object, not {node!r}", where=where)
    description = str(node.get("description", "") or "")
    if "type" in node and "content" in node:  # legacy: {"type": class name, "content": ...}
        class_name, content = node["type"], node["content"]
        if isinstance(content, str):
            content = json.loads(content)
    else:
        class_name = node.get("pythonClassName")
        if not class_name:
            raise DatasetInfoError("a feature without pythonClassName", where=where)
        fields = [k for k in node if k not in ("pythonClassName", "description", "valueRange")]
        content = node[fields[0]] if fields else {}
        if isinstance(content, Mapping) and set(content) == {"json"}:  # JsonFeature
            content = json.loads(content["json"])
    short = class_name.rsplit(".", 1)[-1]
    reader = _READERS.get(short) if class_name.startswith(_TFDS_PREFIX) else None
    feature = reader(content, where, description) if reader is not None else None
    if feature is None:
        feature = UnknownFeature(class_name, content, description)
    return feature


def class_labels(feature: Feature, name: Optional[str] = None) -> Iterator[Tuple[Any, str]]:
    """(ClassLabel, the stem of its labels file) for each ClassLabel of the tree, named as TFDS
    names them: nested names joined by '-' ('/' in a key becomes '.'); the top feature's is
    'None' (TFDS formats the missing name)."""
    if isinstance(feature, FeaturesDict):
        for key, child in feature.items():
            child_name = key.replace("/", ".")
            yield from class_labels(child, child_name if name is None else f"{name}-{child_name}")
    elif isinstance(feature, Sequence):
        yield from class_labels(feature.feature, name)
    elif isinstance(feature, ClassLabel):
        yield feature, str(name)
    elif isinstance(feature, LabeledImage):
        yield feature.labels, str(name)
