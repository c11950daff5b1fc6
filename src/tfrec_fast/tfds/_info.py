"""dataset_info.json and features.json of a prepared TFDS dataset directory."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ._features import ClassLabel, Feature, FeaturesDict, parse_tree


class TFDSMetadataError(ValueError):
    """A prepared dataset directory whose metadata is missing, unreadable or inconsistent with
    its files."""


@dataclass
class SplitInfo:
    name: str
    shard_lengths: List[int]
    num_bytes: int
    files: List[str]  # absolute paths, in shard order

    @property
    def num_examples(self) -> int:
        return sum(self.shard_lengths)

    @property
    def num_shards(self) -> int:
        return len(self.shard_lengths)


@dataclass
class DatasetInfo:
    name: str
    version: str
    description: str
    citation: str
    homepage: str
    file_format: str
    features: Feature
    splits: Dict[str, SplitInfo]
    supervised_keys: Optional[tuple] = None
    data_dir: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    def class_labels(self) -> Dict[str, ClassLabel]:
        """Every ClassLabel of the tree, by flattened name."""
        tree = self.features
        leaves = tree.leaves() if isinstance(tree, FeaturesDict) else [tree]
        return {f.name: f for f in leaves if isinstance(f, ClassLabel)}


def _read_json(path: str, what: str) -> Dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise TFDSMetadataError(f"{path} is missing: {os.path.dirname(path)} is not a prepared "
                                f"TFDS dataset directory (it needs {what})") from None
    except ValueError as error:
        raise TFDSMetadataError(f"{path} is not valid JSON: {error}") from None


def _labels_reader(directory: str):
    def labels(name: str) -> Optional[List[str]]:
        path = os.path.join(directory, name.replace("/", "-") + ".labels.txt")
        try:
            with open(path, encoding="utf-8") as f:
                return [line.rstrip("\n") for line in f if line.strip()]
        except FileNotFoundError:
            return None
    return labels


def _shard_files(directory: str, name: str, split: str, file_format: str, template: str,
                 count: int) -> List[str]:
    template = template or "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"
    files = []
    for i in range(count):
        base = (template.replace("{DATASET}", name).replace("{SPLIT}", split)
                .replace("{FILEFORMAT}", file_format)
                .replace("{SHARD_X_OF_Y}", f"{i:05d}-of-{count:05d}")
                .replace("{SHARD_INDEX}", f"{i:05d}").replace("{NUM_SHARDS}", f"{count:05d}"))
        files.append(os.path.join(directory, base))
    return files


def read_info(directory: str) -> DatasetInfo:
    """Reads a prepared dataset directory's metadata; every shard must exist."""
    info = _read_json(os.path.join(directory, "dataset_info.json"), "dataset_info.json")
    features_json = _read_json(os.path.join(directory, "features.json"), "features.json")
    file_format = info.get("fileFormat", "tfrecord") or "tfrecord"
    if file_format != "tfrecord":
        raise TFDSMetadataError(f"{directory}: the dataset is stored as {file_format}, not "
                                "TFRecord (tfrec_fast.tfds reads TFRecord shards)")
    name = info.get("name", os.path.basename(os.path.dirname(directory)))
    splits = {}
    for s in info.get("splits", []):
        lengths = [int(n) for n in s.get("shardLengths", [])]
        files = _shard_files(directory, name, s["name"], file_format,
                             s.get("filepathTemplate", ""), len(lengths))
        missing = [f for f in files if not os.path.exists(f)]
        if missing:
            raise TFDSMetadataError(f"split {s['name']!r}: shard {missing[0]} is missing "
                                    f"({len(missing)} of {len(files)} shards missing)")
        splits[s["name"]] = SplitInfo(s["name"], lengths, int(s.get("numBytes", 0)), files)
    keys = info.get("supervisedKeys", {}).get("tuple", {}).get("items")
    supervised = tuple(item.get("featureKey") for item in keys) if keys else None
    tree = parse_tree(features_json, _labels_reader(directory))
    return DatasetInfo(name=name, version=info.get("version", ""),
                       description=info.get("description", ""),
                       citation=info.get("citation", ""),
                       homepage=(info.get("location", {}).get("urls") or [""])[0],
                       file_format=file_format, features=tree, splits=splits,
                       supervised_keys=supervised, data_dir=directory, raw=info)
