"""A prepared TFDS dataset's metadata: where it is, dataset_info.json and features.json.

`tfds build` writes ``<data_dir>/<name>[/<config>]/<version>/`` holding dataset_info.json
(description, splits with their per-shard record counts ``shardLengths``, file format, ...),
features.json (the feature tree, see features.py), one ``<feature>.labels.txt`` per ClassLabel
with names, and the shards ``<name>-<split>.tfrecord-00000-of-00004`` (the split's
``filepathTemplate``). The directory may be local or in a store (a URL, see _files.py): it is
listed once when the dataset is opened, and the listing (with the sizes and versions a store
gives) serves every file looked for afterwards.
"""

from __future__ import annotations

import errno
import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..storage import Location
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
    ``filenames`` (full paths or URLs, in order; ``locations``: the same as
    :class:`~tfrec_fast.storage.Location`)."""

    name: str
    shard_lengths: List[int]
    num_bytes: int
    filenames: List[str]
    locations: List[Location] = field(default_factory=list, repr=False, compare=False)

    @property
    def num_examples(self) -> int:
        return sum(self.shard_lengths)

    @property
    def num_shards(self) -> int:
        return len(self.shard_lengths)

    def __repr__(self) -> str:
        return f"<SplitInfo num_examples={self.num_examples}, num_shards={self.num_shards}>"


@dataclass
class DatasetInfo:
    """What TFDS's ``builder.info`` holds, read from the prepared directory ``data_dir`` (a
    path or URL; ``location``: the same as a :class:`~tfrec_fast.storage.Location`, and
    ``files``: its files by name, from one listing, or None where the store lists nothing)."""

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
    location: Optional[Location] = field(default=None, repr=False, compare=False)
    files: Optional[Dict[str, Location]] = field(default=None, repr=False, compare=False)

    @property
    def full_name(self) -> str:
        parts = [self.name] + ([self.config_name] if self.config_name else []) + [self.version]
        return "/".join(parts)

    @property
    def data_dir_name(self) -> str:
        """``data_dir`` as messages name it (a URL's credentials masked)."""
        return self.location.name if self.location is not None else self.data_dir

    def __repr__(self) -> str:
        splits = ", ".join(f"{k}: {v.num_examples}" for k, v in self.splits.items())
        features = repr(self.features).replace("\n", "\n    ")
        return (
            f"DatasetInfo(\n    name={self.name!r},\n    full_name={self.full_name!r},\n"
            f"    data_dir={self.data_dir_name!r},\n    description={self.description!r},\n"
            f"    splits={{{splits}}},\n    features={features},\n"
            f"    supervised_keys={self.supervised_keys!r},\n)"
        )


# ---- finding the directory ---------------------------------------------------------------------


def _version_key(name: str) -> Tuple[int, ...]:
    return tuple(int(x) for x in name.split("."))


def _has_info(directory: Location) -> bool:
    return directory.join(DATASET_INFO).exists()


def _versions(directory: Location) -> List[str]:
    try:
        names = directory.listdir()
    except OSError:
        return []
    return sorted(
        (n for n in names if _VERSION.match(n) and _has_info(directory.join(n))), key=_version_key
    )


def locate(path: Location, name: Optional[str] = None) -> Location:
    """The prepared dataset directory that ``path`` (and ``name``) mean.

    ``path`` is the directory itself (``~/tensorflow_datasets/mnist/3.0.1``), a dataset or
    config directory holding version directories (the newest prepared one is taken), or a data
    dir plus TFDS's ``name[/config][:version]`` (also written as one path:
    ``~/tensorflow_datasets/mnist:3.0.1``). Local or in a store alike.

    Raises
    ------
    FileNotFoundError
        No prepared dataset there (naming the directory, and the configs when there are
        several).
    """
    if name:
        base, _, version = name.partition(":")
        path = _files.join(path, *base.split("/"), *([version] if version else []))
    elif ":" in path.basename and not path.exists():
        base, _, version = path.basename.partition(":")
        path = _files.join(path.parent, base, version)
    if _has_info(path):
        return path
    versions = _versions(path)
    if versions:
        return path.join(versions[-1])
    if not path.isdir():
        if path.os_path is None:  # a store may not list directories (a plain HTTP server)
            raise FileNotFoundError(
                errno.ENOENT,
                "no prepared TFDS dataset here: nothing is "
                "listed there (expected <data_dir>/<name>[/<config>]/"
                "<version>; where the store lists no directories, name "
                "the version: name='<name>:<version>', or its URL)",
                path.name,
            )
        raise FileNotFoundError(
            errno.ENOENT,
            "no prepared TFDS dataset here: the directory does "
            "not exist (expected <data_dir>/<name>[/<config>]/<version>)",
            path.name,
        )
    configs = sorted(n for n in path.listdir() if _versions(path.join(n)))
    if configs:
        raise FileNotFoundError(
            errno.ENOENT,
            "this dataset has several configs: open one of "
            f"{configs} (path/<config>, or name='<name>/<config>')",
            path.name,
        )
    raise FileNotFoundError(
        errno.ENOENT,
        f"no {DATASET_INFO} here nor in a version directory "
        "below: is this a directory `tfds build` prepared?",
        path.name,
    )


# ---- reading ---------------------------------------------------------------------------------


def _read_json(location: Location) -> Any:
    data = _files.read_bytes(location)  # (FileNotFoundError as it is)
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as error:
        raise DatasetInfoError(f"not valid JSON ({error})", where=location.name) from None


def _int(value: Any, where: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise DatasetInfoError(f"expected an integer, found {value!r}", where=where) from None


def shard_names(dataset: str, split: str, template: str, suffix: str, num_shards: int) -> List[str]:
    """The shard file names of a split, as TFDS's ShardedFileTemplate makes them."""
    digits = max(len(str(num_shards)), _SHARD_DIGITS)
    out = []
    for index in range(num_shards):
        x, y = f"{index:0{digits}d}", f"{num_shards:0{digits}d}"
        out.append(
            template.format(
                DATASET=dataset,
                SPLIT=split,
                FILEFORMAT=suffix,
                SHARD_INDEX=x,
                NUM_SHARDS=y,
                SHARD_X_OF_Y=f"{x}-of-{y}",
            )
        )
    return out


def _file(directory: Location, files: Optional[Mapping[str, Location]], name: str) -> Location:
    """A file of the directory: the listing's (with its size and version), else by its name."""
    found = files.get(name) if files is not None else None
    return found if found is not None else directory.join(name)


def _splits(
    info: Mapping,
    directory: Location,
    files: Optional[Mapping[str, Location]],
    dataset: str,
    where: str,
) -> Dict[str, SplitInfo]:
    splits = {}
    for entry in info.get("splits", []):
        name = entry.get("name")
        at = f"{where}: split {name!r}"
        if "shardLengths" not in entry:
            raise DatasetInfoError(
                "no shardLengths (prepared by a TFDS older than 3.x, which did not record "
                "records per shard): rebuild it with a current tensorflow-datasets",
                where=at,
            )
        lengths = [_int(n, at) for n in entry["shardLengths"]]
        template = entry.get("filepathTemplate") or DEFAULT_TEMPLATE
        try:
            names = shard_names(dataset, name, template, "tfrecord", len(lengths))
        except (KeyError, IndexError, ValueError):
            raise DatasetInfoError(f"unknown filepathTemplate {template!r}", where=at) from None
        locations = [_file(directory, files, n) for n in names]
        splits[name] = SplitInfo(
            name,
            lengths,
            _int(entry.get("numBytes", 0), at),
            [loc.url for loc in locations],
            locations,
        )
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


def read_info(directory: Location) -> DatasetInfo:
    """Reads dataset_info.json, features.json and the ClassLabel names files of a prepared
    dataset directory (see :func:`locate`), listing it once.

    Raises
    ------
    FileNotFoundError
        dataset_info.json or features.json is missing.
    DatasetInfoError
        Either is malformed, or describes a dataset this reader does not read.
    """
    files = _files.listing(directory)
    info_location = _file(directory, files, DATASET_INFO)
    info = _read_json(info_location)
    where = info_location.name
    if not isinstance(info, Mapping):
        raise DatasetInfoError("expected a JSON object", where=where)
    file_format = info.get("fileFormat") or "tfrecord"
    if file_format != "tfrecord":
        raise DatasetInfoError(
            f"this dataset is stored as {file_format}, not TFRecord: tfrec_fast reads TFRecord "
            "shards (rebuild with `tfds build --file_format=tfrecord`)",
            where=where,
        )
    features_location = _file(directory, files, FEATURES)
    try:
        tree = _read_json(features_location)
    except FileNotFoundError:
        raise FileNotFoundError(
            errno.ENOENT,
            f"{FEATURES} is missing: TFDS writes the feature "
            f"tree there, beside {DATASET_INFO}; without it the Examples "
            "cannot be decoded (copy it from where the dataset was built)",
            features_location.name,
        ) from None
    features = from_json(tree, FEATURES)
    _load_label_names(features, directory, files)
    name = info.get("name", "")
    config = info.get("configName", "") or ""
    homepage = info.get("location") or {}
    return DatasetInfo(
        name=name,
        version=info.get("version", ""),
        data_dir=directory.url,
        description=info.get("description", ""),
        citation=info.get("citation", ""),
        homepage=(homepage.get("urls") or [""])[0],
        config_name=config,
        config_description=info.get("configDescription", ""),
        file_format=file_format,
        disable_shuffling=bool(info.get("disableShuffling", False)),
        splits=_splits(info, directory, files, name, where),
        features=features,
        supervised_keys=_supervised_keys(info.get("supervisedKeys")),
        release_notes=dict(info.get("releaseNotes") or {}),
        module_name=info.get("moduleName", ""),
        location=directory,
        files=files,
    )


def _load_label_names(
    features: Feature, directory: Location, files: Optional[Mapping[str, Location]]
) -> None:
    """ClassLabel names from <feature>.labels.txt, one per line (as TFDS's load_metadata)."""
    for label, stem in class_labels(features):
        name = f"{stem}.labels.txt"
        if files is not None and name not in files:
            continue  # only num_classes is known: names are "0", "1", ...
        location = _file(directory, files, name)
        try:
            text = _files.read_bytes(location).decode("utf-8")
        except FileNotFoundError:
            continue
        names = [line.strip() for line in text.split("\n") if line.strip()]
        if label.num_classes is not None and label.num_classes != len(names):
            raise DatasetInfoError(
                f"{len(names)} names but features.json says num_classes={label.num_classes}",
                where=location.name,
            )
        label._names = names
        label.num_classes = len(names)
