"""Read datasets prepared by TensorFlow Datasets (``tfds build``) without TensorFlow.

    import tfrec_fast.tfds
    ds = tfrec_fast.tfds.open("~/tensorflow_datasets/mnist/3.0.1", decode_images=True)
    ds.info.features["label"].names
    train = ds["train[:10%]"]
    len(train), train[0], train.get_batch([5, 1, 9])
    for example in train: ...          # what tfds.as_numpy(builder.as_dataset(...)) gives

The feature tree comes from features.json and split sizes from dataset_info.json: nothing to
describe by hand. The directory may be local or in a store, as a URL of any fsspec protocol
(``open("gs://bucket/tensorflow_datasets/mnist/3.0.1", storage_options={...})``).
``load``/``builder``/``as_numpy`` keep TFDS's names for code switching over, and
tfrec_fast.tfds.torch has a map-style PyTorch dataset of examples and an iterable one of
the steps of RLDS episodes.

RLDS datasets (robot episodes, ``steps`` a nested ``tfds.features.Dataset``):

    episodes = tfrec_fast.tfds.open(path, decode_images=True)["train"]
    episode = episodes[7]                       # random access to episode 7
    for step in episode["steps"]: ...           # step dicts, as tfds.as_numpy gives them
    columns = tfrec_fast.tfds.open(path, decode_images=True, nested="columns")["train"][7]
    columns["steps"]["action"]                  # [steps, 7] float32: stacked over time
"""

from . import decode, features
from .compat import (
    GCS_DATA_DIR,
    ReadConfig,
    as_numpy,
    builder,
    builder_from_directory,
    gcs_data_dir,
    load,
)
from .dataset import Batched, Dataset, Split, open
from .decode import SkipDecoding
from .errors import DatasetInfoError, UnknownFeatureError
from .metadata import DatasetInfo, SplitInfo
from .splits import ReadInstruction

__all__ = [
    "Batched",
    "Dataset",
    "DatasetInfo",
    "DatasetInfoError",
    "GCS_DATA_DIR",
    "ReadConfig",
    "ReadInstruction",
    "SkipDecoding",
    "Split",
    "SplitInfo",
    "UnknownFeatureError",
    "as_numpy",
    "builder",
    "builder_from_directory",
    "decode",
    "features",
    "gcs_data_dir",
    "load",
    "open",
]
