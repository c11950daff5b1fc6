"""TFDS's reading functions under their own names, for code switching from TensorFlow Datasets.

``import tfrec_fast.tfds as tfds`` keeps ``tfds.load``, ``tfds.builder``,
``tfds.builder_from_directory``, ``tfds.as_numpy`` and ``tfds.decode.SkipDecoding`` working on
datasets already prepared (nothing is downloaded or built: that needs tensorflow-datasets), with
the values
``tfds.as_numpy(tfds.load(...))`` gives: images decoded unless skipped, TFDS's order.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from . import _files
from .dataset import Batched, Dataset, Split
from .metadata import locate

__all__ = ["ReadConfig", "GCS_DATA_DIR", "load", "builder", "builder_from_directory", "as_numpy"]


@dataclass
class ReadConfig:
    """The part of ``tfds.ReadConfig`` that decides the order of the examples (TFDS's own
    ReadConfig objects are read the same way). ``interleave_cycle_length=None``: TFDS's default,
    16 shards at a time, or 1 (shard after shard: file order) when the dataset disables
    shuffling; ``shuffle_seed``: the shard order with ``shuffle_files=True``."""

    interleave_cycle_length: Optional[int] = None
    interleave_block_length: int = 16
    shuffle_seed: Optional[int] = None

def _data_dir(data_dir) -> str:
    if data_dir is not None:
        return os.fspath(data_dir)
    return os.environ.get("TFDS_DATA_DIR") or os.path.join("~", "tensorflow_datasets")


# TFDS's public bucket of prepared datasets (tfds.load(..., try_gcs=True)): the same layout as
# a local data dir, <name>[/<config>]/<version>/.
GCS_DATA_DIR = "gs://tfds-data/datasets"


def _full_name(name: str, config: Optional[str], version: Optional[str]) -> str:
    base, _, pinned = name.partition(":")
    if config:
        base = f"{base}/{config}"
    return base + (f":{version or pinned}" if (version or pinned) else "")


def _gcs_or(data_dir, name: str, try_gcs: bool):
    """TFDS's try_gcs: the public bucket when it holds the dataset, else the data dir."""
    if not try_gcs:
        return data_dir
    if data_dir is not None:  # as TFDS refuses it
        raise ValueError(f"Cannot have both `try_gcs=True` and `data_dir={data_dir}` "
                         "explicitly set")
    dataset = name.partition(":")[0].split("/")[0]
    return GCS_DATA_DIR if _files.exists(_files.join(GCS_DATA_DIR, dataset)) else None


def builder(name: str, *, data_dir=None, try_gcs: bool = False, **kwargs: Any) -> Dataset:
    """``tfds.builder(name, data_dir=...)`` for a prepared dataset: its ``.info`` and
    ``.as_dataset(...)``; images decoded by default, as TFDS does.

    Parameters
    ----------
    name : str
        As TFDS takes it: "mnist", "mnist:3.0.1", "wmt14_translate/de-en:1.0.0".
    data_dir : path, optional
        Where prepared datasets are (default ``$TFDS_DATA_DIR`` or ``~/tensorflow_datasets``).
    try_gcs : bool
        As TFDS: read the dataset from TFDS's public bucket (``gs://tfds-data/datasets``) when
        it is there. Reading URLs is not supported yet: this raises
        :class:`~tfrec_fast.tfds.URLNotSupportedError` naming the bucket.
    **kwargs
        ``config=``, ``version=`` as TFDS's builder kwargs.

    Raises
    ------
    FileNotFoundError
        The dataset is not prepared there.
    """
    config = kwargs.pop("config", None)
    version = kwargs.pop("version", None)
    if kwargs:
        raise TypeError(f"builder() got unsupported arguments {sorted(kwargs)}")
    full = _full_name(name, config, version)
    return Dataset(locate(_data_dir(_gcs_or(data_dir, name, try_gcs)), full),
                   decode_images=True)


def builder_from_directory(builder_dir) -> Dataset:
    """``tfds.builder_from_directory``: a prepared dataset directory."""
    return Dataset(locate(builder_dir), decode_images=True)


def load(name: str, *, split=None, data_dir=None, batch_size: Optional[int] = None,
         shuffle_files: bool = False, download: bool = True, as_supervised: bool = False,
         decoders: Optional[Mapping] = None, read_config: Any = None, with_info: bool = False,
         builder_kwargs: Optional[Mapping] = None, download_and_prepare_kwargs=None,
         as_dataset_kwargs: Optional[Mapping] = None, try_gcs: bool = False):
    """``tfds.load`` for a dataset already prepared under ``data_dir``.

    Returns a :class:`Split` (iterate it for the examples), or a dict of them when ``split`` is
    None; ``(dataset, info)`` with ``with_info``. The other arguments are TFDS's
    (``as_dataset_kwargs`` may also hold ``nested=``, see :func:`~tfrec_fast.tfds.open`).

    Parameters
    ----------
    download : bool
        TFDS downloads and prepares a dataset that is not prepared yet; tfrec_fast reads
        prepared datasets only. With ``download=True`` (TFDS's default), a dataset that is not
        prepared raises FileNotFoundError saying how to prepare it with tensorflow-datasets.
    try_gcs : bool
        As TFDS (see :func:`builder`).

    Raises
    ------
    FileNotFoundError
        The dataset is not prepared under ``data_dir``.
    """
    try:
        dataset = builder(name, data_dir=data_dir, try_gcs=try_gcs,
                          **dict(builder_kwargs or {}))
    except FileNotFoundError as error:
        if not download:
            raise
        where = _data_dir(data_dir)
        raise FileNotFoundError(
            error.errno, f"{error.strerror}. tfrec_fast reads datasets prepared by TFDS and does "
            f"not download or build them: prepare {name!r} once with tensorflow-datasets "
            f"(`tfds build {name.partition(':')[0]} --data_dir={where}`, or "
            f"tfds.builder({name!r}, data_dir={where!r}).download_and_prepare()), then load it "
            "here", error.filename) from None
    made = dataset.as_dataset(split, decoders=decoders, as_supervised=as_supervised,
                              shuffle_files=shuffle_files, read_config=read_config,
                              batch_size=batch_size, **dict(as_dataset_kwargs or {}))
    return (made, dataset.info) if with_info else made


def as_numpy(dataset):
    """``tfds.as_numpy``: the splits already hold numpy values, so they are returned as they
    are (also inside dicts, lists and tuples)."""
    if isinstance(dataset, (Split, Batched)):
        return dataset
    if isinstance(dataset, Mapping):
        return {k: as_numpy(v) for k, v in dataset.items()}
    if isinstance(dataset, (list, tuple)):
        return type(dataset)(as_numpy(v) for v in dataset)
    raise TypeError(f"as_numpy takes what tfrec_fast.tfds.load returns, not "
                    f"{type(dataset).__name__}")
