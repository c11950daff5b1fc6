"""TFDS's reading functions under their own names, for code switching from TensorFlow Datasets.

``import tfrec_fast.tfds as tfds`` keeps ``tfds.load``, ``tfds.builder``,
``tfds.builder_from_directory``, ``tfds.as_numpy`` and ``tfds.decode.SkipDecoding`` working on
datasets already prepared (nothing is downloaded or built: that needs tensorflow-datasets), with
the values ``tfds.as_numpy(tfds.load(...))`` gives: images decoded unless skipped, TFDS's order.
A ``data_dir`` may be a URL (``gs://``, ``s3://``, any fsspec protocol, with
``storage_options``), and ``try_gcs=True`` reads TFDS's public bucket.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from ..storage import Location, display
from . import _files
from .dataset import Batched, Dataset, Split
from .metadata import locate

__all__ = [
    "ReadConfig",
    "GCS_DATA_DIR",
    "GCS_DATA_DIR_ENV",
    "gcs_data_dir",
    "load",
    "builder",
    "builder_from_directory",
    "as_numpy",
]


@dataclass
class ReadConfig:
    """The part of ``tfds.ReadConfig`` that decides the order of the examples (TFDS's own
    ReadConfig objects are read the same way). ``interleave_cycle_length=None``: TFDS's default,
    16 shards at a time, or 1 (shard after shard: file order) when the dataset disables
    shuffling; ``shuffle_seed``: the shard order with ``shuffle_files=True``."""

    interleave_cycle_length: Optional[int] = None
    interleave_block_length: int = 16
    shuffle_seed: Optional[int] = None


def _data_dir(data_dir):
    if data_dir is not None:
        return data_dir
    return os.environ.get("TFDS_DATA_DIR") or os.path.join("~", "tensorflow_datasets")


# TFDS's public bucket of prepared datasets (tfds.load(..., try_gcs=True)): the same layout as
# a local data dir, <name>[/<config>]/<version>/. $TFREC_FAST_TFDS_GCS_DATA_DIR, when set, is
# read instead (a mirror, or a test server).
GCS_DATA_DIR = "gs://tfds-data/datasets"
GCS_DATA_DIR_ENV = "TFREC_FAST_TFDS_GCS_DATA_DIR"


def gcs_data_dir() -> str:
    """Where ``try_gcs=True`` looks for prepared datasets.

    Returns
    -------
    str
        ``$TFREC_FAST_TFDS_GCS_DATA_DIR`` when set (a mirror), else TFDS's public bucket,
        ``gs://tfds-data/datasets``.
    """
    return os.environ.get(GCS_DATA_DIR_ENV) or GCS_DATA_DIR


def _full_name(name: str, config: Optional[str], version: Optional[str]) -> str:
    base, _, pinned = name.partition(":")
    if config:
        base = f"{base}/{config}"
    return base + (f":{version or pinned}" if (version or pinned) else "")


def _gcs_or(data_dir, name: str, try_gcs: bool, storage_options, filesystem):
    """TFDS's try_gcs: (the bucket's Location, when it holds the dataset, else ``data_dir``;
    the storage options to read it with). The public bucket is read anonymously unless
    ``storage_options`` or ``filesystem`` say otherwise; as TFDS, a bucket that cannot be
    reached counts as not holding the dataset."""
    if not try_gcs:
        return data_dir, storage_options
    url = gcs_data_dir()
    options = storage_options
    if options is None and filesystem is None and url.startswith(("gs://", "gcs://")):
        options = {"token": "anon"}  # a public bucket: no credentials looked for
    bucket = _files.directory(url, options, filesystem)
    try:
        on_gcs = bucket.join(name.partition(":")[0].split("/")[0]).exists()
    except OSError:  # as TFDS's gcs_utils.exists: no network, blocked, ...
        on_gcs = False
    if not on_gcs:
        return data_dir, storage_options
    if data_dir is not None:  # as TFDS refuses it
        raise ValueError(
            f"Cannot have both `try_gcs=True` and `data_dir={data_dir}` explicitly set"
        )
    return bucket, options


def builder(
    name: str,
    *,
    data_dir=None,
    try_gcs: bool = False,
    storage_options=None,
    filesystem=None,
    **kwargs: Any,
) -> Dataset:
    """``tfds.builder(name, data_dir=...)`` for a prepared dataset: its ``.info`` and
    ``.as_dataset(...)``; images decoded by default, as TFDS does.

    Parameters
    ----------
    name : str
        As TFDS takes it: "mnist", "mnist:3.0.1", "wmt14_translate/de-en:1.0.0".
    data_dir : str, os.PathLike or Location, optional
        Where prepared datasets are (default ``$TFDS_DATA_DIR`` or ``~/tensorflow_datasets``):
        a local directory or a URL (``gs://``, ``s3://``, any fsspec protocol).
    try_gcs : bool
        As TFDS: read the dataset from TFDS's public bucket (``gs://tfds-data/datasets``, or
        ``$TFREC_FAST_TFDS_GCS_DATA_DIR``) when it holds it, through gcsfs, anonymously unless
        ``storage_options`` say otherwise.
    storage_options : dict, optional
        For a URL: its fsspec filesystem's options and tfrec_fast's storage settings (see
        :func:`~tfrec_fast.tfds.open`).
    filesystem : fsspec or pyarrow filesystem, optional
        The filesystem ``data_dir`` is on.
    **kwargs
        ``config=``, ``version=`` as TFDS's builder kwargs.

    Returns
    -------
    Dataset

    Raises
    ------
    FileNotFoundError
        The dataset is not prepared there.
    ValueError
        ``try_gcs=True`` with ``data_dir`` for a dataset the bucket holds (as TFDS).
    TypeError
        An argument TFDS's builder takes that is not supported here.
    ImportError
        A URL without fsspec or its protocol's package (gcsfs for ``try_gcs``).
    """
    config = kwargs.pop("config", None)
    version = kwargs.pop("version", None)
    if kwargs:
        raise TypeError(f"builder() got unsupported arguments {sorted(kwargs)}")
    full = _full_name(name, config, version)
    where, options = _gcs_or(data_dir, name, try_gcs, storage_options, filesystem)
    root = _files.directory(_data_dir(where), options, filesystem)
    return Dataset(locate(root, full), decode_images=True)


def builder_from_directory(builder_dir, *, storage_options=None, filesystem=None) -> Dataset:
    """``tfds.builder_from_directory``: a prepared dataset, images decoded by default.

    Parameters
    ----------
    builder_dir : str, os.PathLike or Location
        The prepared directory (or a directory of its versions: the newest), local or a URL.
    storage_options : dict, optional
        For a URL: its filesystem's options and tfrec_fast's storage settings.
    filesystem : fsspec or pyarrow filesystem, optional
        The filesystem ``builder_dir`` is on.

    Returns
    -------
    Dataset

    Raises
    ------
    FileNotFoundError
        No prepared dataset there.
    """
    return Dataset(
        locate(_files.directory(builder_dir, storage_options, filesystem)), decode_images=True
    )


def load(
    name: str,
    *,
    split=None,
    data_dir=None,
    batch_size: Optional[int] = None,
    shuffle_files: bool = False,
    download: bool = True,
    as_supervised: bool = False,
    decoders: Optional[Mapping] = None,
    read_config: Any = None,
    with_info: bool = False,
    builder_kwargs: Optional[Mapping] = None,
    download_and_prepare_kwargs=None,
    as_dataset_kwargs: Optional[Mapping] = None,
    try_gcs: bool = False,
    storage_options=None,
    filesystem=None,
):
    """``tfds.load`` for a dataset already prepared under ``data_dir``: the examples
    ``tfds.as_numpy(tfds.load(...))`` gives, in its order, images decoded.

    Parameters
    ----------
    name : str
        "mnist", "mnist:3.0.1", "wmt14_translate/de-en:1.0.0".
    split : str, ReadInstruction, list of them, or None
        A TFDS split string ("train[:10%]+test"); a list gives a list; None, every split (a
        dict by name).
    data_dir : str, os.PathLike or Location, optional
        Where prepared datasets are (default ``$TFDS_DATA_DIR`` or ``~/tensorflow_datasets``),
        local or a URL.
    batch_size : int, optional
        Batches of this many examples (-1: the whole split), padded as TFDS pads them.
    shuffle_files : bool
        A new shard order each iteration (TFDS's reshuffle; not TFDS's exact order).
    download : bool
        TFDS downloads and prepares a dataset that is not prepared yet; tfrec_fast reads
        prepared datasets only. With ``download=True`` (TFDS's default), a dataset that is not
        prepared raises FileNotFoundError saying how to prepare it with tensorflow-datasets.
    as_supervised : bool
        Examples as the dataset's ``supervised_keys`` tuple.
    decoders : dict, optional
        ``{feature: SkipDecoding()}``: features in their stored form.
    read_config : ReadConfig, optional
        The interleave of the shards (ours or TFDS's object), the shuffle seed.
    with_info : bool
        Return ``(dataset, info)``.
    builder_kwargs : dict, optional
        ``config=``, ``version=``, as TFDS's.
    download_and_prepare_kwargs : dict, optional
        Accepted for TFDS's signature; nothing is prepared here.
    as_dataset_kwargs : dict, optional
        More arguments of :meth:`Dataset.as_dataset` (``nested=``).
    try_gcs : bool
        As TFDS (see :func:`builder`).
    storage_options : dict, optional
        For a URL ``data_dir``: its fsspec filesystem's options and tfrec_fast's storage
        settings.
    filesystem : fsspec or pyarrow filesystem, optional
        The filesystem ``data_dir`` is on.

    Returns
    -------
    Split, Batched, a dict or list of them; with ``with_info``, ``(that, DatasetInfo)``

    Raises
    ------
    FileNotFoundError
        The dataset is not prepared under ``data_dir``.
    ValueError, KeyError, TypeError, UnknownFeatureError
        As :meth:`Dataset.as_dataset` and :func:`builder`.
    """
    try:
        dataset = builder(
            name,
            data_dir=data_dir,
            try_gcs=try_gcs,
            storage_options=storage_options,
            filesystem=filesystem,
            **dict(builder_kwargs or {}),
        )
    except FileNotFoundError as error:
        if not download:
            raise
        where = (
            display(_data_dir(data_dir)) if not isinstance(data_dir, Location) else data_dir.name
        )
        raise FileNotFoundError(
            error.errno,
            f"{error.strerror}. tfrec_fast reads datasets prepared by TFDS and does "
            f"not download or build them: prepare {name!r} once with tensorflow-datasets "
            f"(`tfds build {name.partition(':')[0]} --data_dir={where}`, or "
            f"tfds.builder({name!r}, data_dir={where!r}).download_and_prepare()), then load it "
            "here",
            error.filename,
        ) from None
    made = dataset.as_dataset(
        split,
        decoders=decoders,
        as_supervised=as_supervised,
        shuffle_files=shuffle_files,
        read_config=read_config,
        batch_size=batch_size,
        **dict(as_dataset_kwargs or {}),
    )
    return (made, dataset.info) if with_info else made


def as_numpy(dataset):
    """``tfds.as_numpy``: the splits already hold numpy values, so they are returned as they
    are (also inside dicts, lists and tuples).

    Parameters
    ----------
    dataset : Split, Batched, or a dict, list or tuple of them
        What :func:`load` or :meth:`Dataset.as_dataset` returns.

    Returns
    -------
    The same structure, holding the same splits.

    Raises
    ------
    TypeError
        Anything else (a tf.data.Dataset, for one).
    """
    if isinstance(dataset, (Split, Batched)):
        return dataset
    if isinstance(dataset, Mapping):
        return {k: as_numpy(v) for k, v in dataset.items()}
    if isinstance(dataset, (list, tuple)):
        return type(dataset)(as_numpy(v) for v in dataset)
    raise TypeError(
        f"as_numpy takes what tfrec_fast.tfds.load returns, not {type(dataset).__name__}"
    )
