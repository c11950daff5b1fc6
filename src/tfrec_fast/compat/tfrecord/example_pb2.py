"""The ``tfrecord`` package's ``example_pb2``: tf.train.Example & co, wire-compatible with
TensorFlow's (tfrec_fast's own proto package, so it never clashes with TensorFlow's)."""

from ...proto import (BytesList, Example, Feature, FeatureList, FeatureLists, Features,  # noqa: F401
                      FloatList, Int64List, SequenceExample)
