"""The ``tfrecord`` package's ``example_pb2``: tf.train.Example & co, wire-compatible with
TensorFlow's (tfrec_fast's own proto package, so it never clashes with TensorFlow's)."""

from ...proto import (
    BytesList,
    Example,
    Feature,
    FeatureList,
    FeatureLists,
    Features,
    FloatList,
    Int64List,
    SequenceExample,
)

__all__ = [
    "BytesList",
    "Example",
    "Feature",
    "FeatureList",
    "FeatureLists",
    "Features",
    "FloatList",
    "Int64List",
    "SequenceExample",
]
