"""A prepared TFDS dataset's metadata: where it is, dataset_info.json and features.json.

`tfds build` writes ``<data_dir>/<name>[/<config>]/<version>/`` holding dataset_info.json
(description, splits with their per-shard record counts ``shardLengths``, file format, ...),
features.json (the feature tree, see features.py), one ``<feature>.labels.txt`` per ClassLabel
with names, and the shards ``<name>-<split>.tfrecord-00000-of-00004`` (the split's
``filepathTemplate``).
"""

from __future__ import annotations

import errno
import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from . import _files
from .errors import DatasetInfoError
from .features import Feature, class_labels, from_json

__all__ = ["DatasetInfo", "SplitInfo", "locate", "read_info"]

DATASET_INFO = "dataset_info.json"
FEATURES = "features.json"
DEFAULT_TEMPLATE = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"
_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
_SHARD_DIGITS = 5  # TFDS pads shard numbers to at least 5 digits


@dataclass
class SplitInfo:
    """One split as dataset_info.json describes it: ``shard_lengths`` records in each of its
    ``filenames`` (absolute paths, in order)."""

    name: str
    shard_lengths: List[int]
    num_bytes: int
    filenames: List[str]

    @property
    def num_examples(self) -> int:
        return sum(self.shard_lengths)

    @property
    def num_shards(self) -> int:
        return len(self.shard_lengths)

    def __repr__(self) -> str:
        return (f"<SplitInfo num_examples={self.num_examples}, "
                f"num_shards={self.num_shards}>")


@dataclass
class DatasetInfo:
    """What TFDS's ``builder.info`` holds, read from the prepared directory ``data_dir``."""

    name: str
    version: str
    data_dir: str
    description: str
    citation: str
    homepage: str
    config_name: str
    config_description: str
    file_format: str
    disable_shuffling: bool
    splits: Dict[str, SplitInfo]
    features: Feature
    supervised_keys: Optional[Any]
    release_notes: Dict[str, str] = field(default_factory=dict)
    module_name: str = ""

    @property
    def full_name(self) -> str:
        parts = [self.name] + ([self.config_name] if self.config_name else []) + [self.version]
        return "/".join(parts)

    def __repr__(self) -> str:
        splits = ", ".join(f"{k}: {v.num_examples}" for k, v in self.splits.items())
        features = repr(self.features).replace("\n", "\n    ")
        return (f"DatasetInfo(\n    name={self.name!r},\n    full_name={self.full_name!r},\n"
                f"    data_dir={self.data_dir!r},\n    description={self.description!r},\n"
                f"    splits={{{splits}}},\n    features={features},\n"
                f"    supervised_keys={self.supervised_keys!r},\n)")


# ---- finding the directory ---------------------------------------------------------------------

def _version_key(name: str) -> Tuple[int, ...]:
    return tuple(int(x) for x in name.split("."))


def _has_info(directory: str) -> bool:
    return _files.isfile(_files.join(directory, DATASET_INFO))


def _versions(directory: str) -> List[str]:
    try:
        names = _files.listdir(directory)
    except OSError:
        return []
    return sorted((n for n in names if _VERSION.match(n) and
                   _has_info(_files.join(directory, n))), key=_version_key)


def locate(path, name: Optional[str] = None) -> str:
    """The prepared dataset directory that ``path`` (and ``name``) mean.

    ``path`` is the directory itself (``~/tensorflow_datasets/mnist/3.0.1``), a dataset or
    config directory holding version directories (the newest prepared one is taken), or a data
    dir plus TFDS's ``name[/config][:version]`` (also written as one path:
    ``~/tensorflow_datasets/mnist:3.0.1``).
    """
    path = _files.normalize(path)
    if name:
        base, _, version = name.partition(":")
        path = _files.join(path, *base.split("/"), *([version] if version else []))
    elif ":" in _files.basename(path) and not _files.exists(path):
        base, _, version = _files.basename(path).partition(":")
        path = _files.join(_files.dirname(path), base, version)
    if _has_info(path):
        return path
    versions = _versions(path)
    if versions:
        return _files.join(path, versions[-1])
    if not _files.isdir(path):
        raise FileNotFoundError(errno.ENOENT, "no prepared TFDS dataset here: the directory does "
                                "not exist (expected <data_dir>/<name>[/<config>]/<version>)",
                                path)
    configs = sorted(n for n in _files.listdir(path) if _versions(_files.join(path, n)))
    if configs:
        raise FileNotFoundError(errno.ENOENT, "this dataset has several configs: open one of "
                                f"{configs} (path/<config>, or name='<name>/<config>')", path)
    raise FileNotFoundError(errno.ENOENT, f"no {DATASET_INFO} here nor in a version directory "
                            "below: is this a directory `tfds build` prepared?", path)


# ---- reading ---------------------------------------------------------------------------------

def _read_json(path: str) -> Any:
    try:
        return json.loads(_files.read_bytes(path))
    except FileNotFoundError:
        raise
    except (ValueError, UnicodeDecodeError) as error:
        raise DatasetInfoError(f"not valid JSON ({error})", where=path) from None


def _int(value: Any, where: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise DatasetInfoError(f"expected an integer, found {value!r}", where=where) from None


def shard_paths(directory: str, dataset: str, split: str, template: str, suffix: str,
                num_shards: int) -> List[str]:
    """The shard files of a split, as TFDS's ShardedFileTemplate names them."""
    digits = max(len(str(num_shards)), _SHARD_DIGITS)
    out = []
    for index in range(num_shards):
        x, y = f"{index:0{digits}d}", f"{num_shards:0{digits}d}"
        name = template.format(DATASET=dataset, SPLIT=split, FILEFORMAT=suffix, SHARD_INDEX=x,
                               NUM_SHARDS=y, SHARD_X_OF_Y=f"{x}-of-{y}")
        out.append(_files.join(directory, name))
    return out


def _splits(info: Mapping, directory: str, dataset: str, where: str) -> Dict[str, SplitInfo]:
    splits = {}
    for entry in info.get("splits", []):
        name = entry.get("name")
        at = f"{where}: split {name!r}"
        if "shardLengths" not in entry:
            raise DatasetInfoError(
                "no shardLengths (prepared by a TFDS older than 3.x, which did not record "
                "records per shard): rebuild it with a current tensorflow-datasets", where=at)
        lengths = [_int(n, at) for n in entry["shardLengths"]]
        template = entry.get("filepathTemplate") or DEFAULT_TEMPLATE
        try:
            files = shard_paths(directory, dataset, name, template, "tfrecord", len(lengths))
        except (KeyError, IndexError, ValueError):
            raise DatasetInfoError(f"unknown filepathTemplate {template!r}", where=at) from None
        splits[name] = SplitInfo(name, lengths, _int(entry.get("numBytes", 0), at), files)
    return splits


def _supervised_keys(value: Any) -> Optional[Any]:
    """("image", "label") from either form TFDS writes ({"tuple": {"items": [{"featureKey":
    ...}]}} or the older {"input": ..., "output": ...})."""
    if not value:
        return None
    if "input" in value or "output" in value:
        return (value.get("input"), value.get("output"))
    if "tuple" in value:
        return tuple(_supervised_keys(item) for item in value["tuple"].get("items", []))
    if "dict" in value:
        return {k: _supervised_keys(v) for k, v in value["dict"].get("dict", {}).items()}
    return value.get("featureKey")


def read_info(directory: str) -> DatasetInfo:
    """Reads dataset_info.json, features.json and the ClassLabel names files of a prepared
    dataset directory (see :func:`locate`)."""
    info_path = _files.join(directory, DATASET_INFO)
    info = _read_json(info_path)
    if not isinstance(info, Mapping):
        raise DatasetInfoError("expected a JSON object", where=info_path)
    file_format = info.get("fileFormat") or "tfrecord"
    if file_format != "tfrecord":
        raise DatasetInfoError(
            f"this dataset is stored as {file_format}, not TFRecord: tfrec_fast reads TFRecord "
            "shards (rebuild with `tfds build --file_format=tfrecord`)", where=info_path)
    features_path = _files.join(directory, FEATURES)
    if not _files.isfile(features_path):
        raise FileNotFoundError(errno.ENOENT, f"{FEATURES} is missing: TFDS writes the feature "
                                f"tree there, beside {DATASET_INFO}; without it the Examples "
                                "cannot be decoded (copy it from where the dataset was built)",
                                features_path)
    features = from_json(_read_json(features_path), FEATURES)
    _load_label_names(features, directory)
    name = info.get("name", "")
    config = info.get("configName", "") or ""
    location = info.get("location") or {}
    return DatasetInfo(
        name=name,
        version=info.get("version", ""),
        data_dir=directory,
        description=info.get("description", ""),
        citation=info.get("citation", ""),
        homepage=(location.get("urls") or [""])[0],
        config_name=config,
        config_description=info.get("configDescription", ""),
        file_format=file_format,
        disable_shuffling=bool(info.get("disableShuffling", False)),
        splits=_splits(info, directory, name, info_path),
        features=features,
        supervised_keys=_supervised_keys(info.get("supervisedKeys")),
        release_notes=dict(info.get("releaseNotes") or {}),
        module_name=info.get("moduleName", ""),
    )


def _load_label_names(features: Feature, directory: str) -> None:
    """ClassLabel names from <feature>.labels.txt, one per line (as TFDS's load_metadata)."""
    for label, stem in class_labels(features):
        path = _files.join(directory, f"{stem}.labels.txt")
        try:
            names = [line.strip() for line in _files.read_text(path).split("\n") if line.strip()]
        except FileNotFoundError:
            continue  # only num_classes is known: names are "0", "1", ...
        if label.num_classes is not None and label.num_classes != len(names):
            raise DatasetInfoError(f"{len(names)} names but features.json says "
                                   f"num_classes={label.num_classes}", where=path)
        label._names = names
        label.num_classes = len(names)
