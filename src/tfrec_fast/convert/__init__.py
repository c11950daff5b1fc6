"""Converting datasets to sharded TFRecords of tf.train.Example, without TensorFlow.

- :func:`convert_imagefolder`: a folder with one subdirectory of images per class.
- :func:`convert_voc`: a PASCAL VOC tree (detection boxes, optional segmentation masks).
- :func:`convert_numpy`: arrays of an ``.npz`` file sharing their first dimension.

Each writes shards ``{out_dir}/{prefix}-{i:05d}-of-{n:05d}.tfrecord`` and a manifest
``{prefix}.manifest.json`` whose spec parses them (``tfrec_fast.read_manifest(path)["spec"]``),
and returns a :class:`ConvertSummary`. The same conversions run from the command line as
``tfrec-fast convert imagefolder|voc|numpy``. Images are read by Pillow (the ``convert`` extra).
"""

from ._common import BadInputError, ConvertSummary, parse_size
from .arrays import convert_numpy
from .imagefolder import IMAGE_EXTENSIONS, convert_imagefolder
from .voc import VOC_LABELS, convert_voc

__all__ = [
    "BadInputError",
    "ConvertSummary",
    "IMAGE_EXTENSIONS",
    "VOC_LABELS",
    "convert_imagefolder",
    "convert_numpy",
    "convert_voc",
    "parse_size",
]
