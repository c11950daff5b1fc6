"""Read datasets prepared by TensorFlow Datasets (``tfds build``) without TensorFlow.

    import tfrec_fast.tfds as tfds_fast
    ds = tfds_fast.open("~/tensorflow_datasets/mnist/3.0.1")        # or open("mnist", data_dir=...)
    ds.info.splits["train"].num_examples, ds.info.class_labels()["label"].names
    train = ds["train[:10%]"]                                        # TFDS split strings
    for example in train: ...                                        # file order, as tfds.as_numpy
    train[5], train.get_batch([3, 1, 4])                             # random access
    loader = torch.utils.data.DataLoader(train.to_torch(), batch_size=32, shuffle=True)

Values are what ``tfds.as_numpy(builder.as_dataset(split, shuffle_files=False))`` gives: nested
dicts, Tensors with their dtype and shape, ClassLabel as int64, Text as bytes, Sequence with a
leading dimension (a Sequence of a dict is a dict of arrays), BBoxFeature float32 [N, 4],
images as encoded bytes unless ``decode_images=True`` (Pillow, uint8 [H, W, C]). The feature
spec comes from features.json. ``load``/``as_numpy`` mirror ``tfds.load``/``tfds.as_numpy``.
"""

from __future__ import annotations

import os
import re
from typing import Any, Optional, Union

from ._dataset import Dataset, Split
from ._features import UnknownFeatureError
from ._info import DatasetInfo, SplitInfo, TFDSMetadataError

__all__ = ["open", "load", "as_numpy", "Dataset", "Split", "DatasetInfo", "SplitInfo",
           "TFDSMetadataError", "UnknownFeatureError"]

_VERSION = re.compile(r"^\d+\.\d+\.\d+$")


def _directory(path: str, data_dir: Optional[str]) -> str:
    """A prepared dataset directory from a path, or a name ("mnist", "mnist/3.0.1",
    "mnist:3.0.1") under ``data_dir`` (default: $TFDS_DATA_DIR or ~/tensorflow_datasets);
    without a version, the newest one there."""
    path = os.path.expanduser(os.fspath(path))
    if os.path.exists(os.path.join(path, "dataset_info.json")):
        return path
    root = os.path.expanduser(data_dir or os.environ.get("TFDS_DATA_DIR") or
                              os.path.join("~", "tensorflow_datasets"))
    name = path.replace(":", "/")
    candidate = name if os.path.isabs(name) else os.path.join(root, name)
    if os.path.isdir(candidate) and not os.path.exists(os.path.join(candidate,
                                                                    "dataset_info.json")):
        versions = sorted((v for v in os.listdir(candidate) if _VERSION.match(v)),
                          key=lambda v: tuple(int(x) for x in v.split(".")))
        if versions:
            candidate = os.path.join(candidate, versions[-1])
    if not os.path.exists(os.path.join(candidate, "dataset_info.json")):
        raise TFDSMetadataError(f"no prepared TFDS dataset at {path!r} (looked for "
                                f"{os.path.join(candidate, 'dataset_info.json')})")
    return candidate


def open(path: Union[str, "os.PathLike[str]"], *, data_dir: Optional[str] = None,
         decode_images: bool = False) -> Dataset:  # noqa: A001 - the module's verb
    """Opens a prepared dataset directory (or a name under ``data_dir``)."""
    return Dataset(_directory(os.fspath(path), data_dir), decode_images)


def load(name: str, *, split: Optional[str] = None, data_dir: Optional[str] = None,
         as_supervised: bool = False, decode_images: bool = True, shuffle_files: bool = False,
         download: bool = False, **_ignored: Any):
    """``tfds.load`` for prepared TFRecord datasets: a Split (or a dict of them when ``split``
    is None). Images are decoded by default, as TFDS does. Nothing is downloaded or prepared
    (``download=True`` is refused); ``shuffle_files=True`` is refused (order is file order)."""
    if download:
        raise ValueError("tfrec_fast.tfds.load reads prepared datasets only; prepare it with "
                         "`tfds build` first")
    if shuffle_files:
        raise ValueError("shuffle_files=True is not supported: iterate a torch DataLoader "
                         "with shuffle=True over split.to_torch() instead")
    ds = open(name, data_dir=data_dir, decode_images=decode_images)
    if split is None:
        return {s: _supervised(ds[s], as_supervised) for s in ds.splits}
    return _supervised(ds[split], as_supervised)


class _Supervised:
    def __init__(self, split: Split):
        self.split = split
        keys = split.info.supervised_keys
        if not keys:
            raise ValueError(f"{split.info.name} has no supervised keys")
        self.keys = keys

    def __len__(self) -> int:
        return len(self.split)

    def __iter__(self):
        for example in self.split:
            yield tuple(example[k] for k in self.keys)


def _supervised(split: Split, as_supervised: bool):
    return _Supervised(split) if as_supervised else split


def as_numpy(dataset) -> Any:
    """``tfds.as_numpy``: an iterator over the examples of a Split (already numpy)."""
    if isinstance(dataset, dict):
        return {k: as_numpy(v) for k, v in dataset.items()}
    return iter(dataset)
