"""Read datasets prepared by TensorFlow Datasets (``tfds build``) without TensorFlow.

    import tfrec_fast.tfds
    ds = tfrec_fast.tfds.open("~/tensorflow_datasets/mnist/3.0.1", decode_images=True)
    ds.info.features["label"].names
    train = ds["train[:10%]"]
    len(train), train[0], train.get_batch([5, 1, 9])
    for example in train: ...          # what tfds.as_numpy(builder.as_dataset(...)) gives

The feature tree comes from features.json and split sizes from dataset_info.json: nothing to
describe by hand. ``load``/``builder``/``as_numpy`` keep TFDS's names for code switching over,
and tfrec_fast.tfds.torch has a map-style PyTorch dataset.
"""

from . import decode, features
from .compat import ReadConfig, as_numpy, builder, builder_from_directory, load
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
    "load",
    "open",
]
