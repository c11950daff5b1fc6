"""A PASCAL VOC tree -> sharded TFRecords of tf.train.Example, with SSD's and deeplab's keys.

Layout (VOC2007 / VOC2012, or any dataset annotated the same way)::

    DIR/ImageSets/Main/{split}.txt          image ids, one a line (or, when there is no such file,
    DIR/ImageSets/Segmentation/{split}.txt  this one)
    DIR/JPEGImages/{id}.jpg
    DIR/Annotations/{id}.xml
    DIR/SegmentationClass/{id}.png          optional, per image

Features of each Example (those SSD-Tensorflow's ``pascalvoc_to_tfrecords.py`` and deeplab's
``build_voc2012_data.py`` write; a scalar is a list of one value)::

    image/encoded                     bytes    the JPEG file's bytes as they are
    image/format                      bytes    from the image header, lower case: b"jpeg"
    image/filename                    bytes    the image's file name, b"{id}.jpg"
    image/height, image/width         int64    from the XML <size>, checked against the image
    image/channels                    int64    <size><depth>, checked (when given, not 0)
    image/shape                       int64 x3 [height, width, channels]
    image/object/bbox/xmin, ymin,     float    one per <object>: <bndbox> coordinates divided
                      xmax, ymax               by the width (x) or height (y), as SSD does
    image/object/bbox/label           int64    the class's index in ``labels``
    image/object/bbox/label_text      bytes    the class name as written in the XML
    image/object/bbox/difficult       int64    <difficult>, 0 when absent
    image/object/bbox/truncated       int64    <truncated>, 0 when absent
    image/segmentation/class/encoded  bytes    SegmentationClass/{id}.png's bytes, when it exists
    image/segmentation/class/format   bytes    b"png", with it

An image without objects has empty object lists. ``labels`` defaults to :data:`VOC_LABELS`,
SSD-Tensorflow's numbering: ``"none"`` (background) is 0 and the 20 classes are 1..20 in
alphabetical order. A label file lists class names one a line, line ``i`` naming label ``i``; the
labels used are written beside the shards as ``{prefix}.labels.txt`` in that format.

Bad inputs (skipped, or fatal with ``strict``): a missing image or annotation, unparsable XML,
no <size>, a size or depth that disagrees with the image, an object without <name> or
<bndbox>, a class not in ``labels``, a segmentation mask of another size than the image.
"""

from __future__ import annotations

import functools
import os
import time
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from ..encode import Bytes, Floats, Int64s, encode_example
from ..records import same_file
from ..spec import FixedLen, VarLen
from ._common import BadInputError, ConvertSummary, WriteOptions, output_path, write_text_file
from ._images import ImageHeader, read_file, read_image_header
from ._pipeline import shuffled, write_jobs

__all__ = ["VOC_LABELS", "convert_voc", "read_labels", "read_split", "voc_spec"]

VOC_LABELS = (
    "none",
    "aeroplane",
    "bicycle",
    "bird",
    "boat",
    "bottle",
    "bus",
    "car",
    "cat",
    "chair",
    "cow",
    "diningtable",
    "dog",
    "horse",
    "motorbike",
    "person",
    "pottedplant",
    "sheep",
    "sofa",
    "train",
    "tvmonitor",
)

PathLike = Union[str, "os.PathLike[str]"]


class VocObject(NamedTuple):
    name: str
    xmin: float
    ymin: float
    xmax: float
    ymax: float
    difficult: int
    truncated: int


class VocAnnotation(NamedTuple):
    width: int
    height: int
    depth: int  # 0 when the XML leaves it out
    objects: List[VocObject]


def voc_spec(segmentation: bool) -> Dict[str, Union[FixedLen, VarLen]]:
    """The feature spec of the Examples written; ``segmentation``: some images have masks (the
    mask features then read as b"" / b"png" where an image has none, as deeplab reads them)."""
    spec: Dict[str, Union[FixedLen, VarLen]] = {
        "image/encoded": FixedLen((), "bytes"),
        "image/format": FixedLen((), "bytes"),
        "image/filename": FixedLen((), "bytes"),
        "image/height": FixedLen((), "int64"),
        "image/width": FixedLen((), "int64"),
        "image/channels": FixedLen((), "int64"),
        "image/shape": FixedLen((3,), "int64"),
    }
    for key in ("xmin", "ymin", "xmax", "ymax"):
        spec[f"image/object/bbox/{key}"] = VarLen("float32")
    spec["image/object/bbox/label"] = VarLen("int64")
    spec["image/object/bbox/label_text"] = VarLen("bytes")
    spec["image/object/bbox/difficult"] = VarLen("int64")
    spec["image/object/bbox/truncated"] = VarLen("int64")
    if segmentation:
        spec["image/segmentation/class/encoded"] = FixedLen((), "bytes", default=b"")
        spec["image/segmentation/class/format"] = FixedLen((), "bytes", default=b"png")
    return spec


def read_split(voc_dir: PathLike, split: str) -> Tuple[List[str], str]:
    """(image ids, the list file read): ImageSets/Main/{split}.txt, else ImageSets/Segmentation/."""
    tried = []
    for kind in ("Main", "Segmentation"):
        path = os.path.join(os.fspath(voc_dir), "ImageSets", kind, f"{split}.txt")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                # The first word of a line: class lists (aeroplane_train.txt) add a flag after it.
                return [line.split()[0] for line in f if line.strip()], path
        tried.append(path)
    raise FileNotFoundError(f"no image list for split {split!r}: neither {tried[0]} nor {tried[1]}")


def read_labels(labels: Union[None, PathLike, Sequence[str]]) -> Tuple[str, ...]:
    """Class names in label order: VOC_LABELS, a file's lines, or the sequence given."""
    if labels is None:
        return VOC_LABELS
    if isinstance(labels, (str, os.PathLike)):
        with open(labels, encoding="utf-8") as f:
            names = tuple(line.strip() for line in f if line.strip())
    else:
        names = tuple(labels)
    if not names:
        raise ValueError("the label list is empty")
    if len(set(names)) != len(names):
        raise ValueError("the label list names a class twice")
    return names


def _number(
    element: Optional[ET.Element], tag: str, path: str, default: Optional[float] = None
) -> float:
    text = None if element is None else element.findtext(tag)
    if text is None or not text.strip():
        if default is not None:
            return default
        raise BadInputError(path, f"no <{tag}> in <{getattr(element, 'tag', '?')}>")
    try:
        return float(text)
    except ValueError:
        raise BadInputError(path, f"<{tag}> is not a number: {text.strip()!r}") from None


def parse_annotation(path: str) -> VocAnnotation:
    """Reads one Annotations/{id}.xml (a missing or malformed file is a BadInputError)."""
    data = read_file(path, "annotation")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as error:
        raise BadInputError(path, f"malformed XML ({error})") from None
    size = root.find("size")
    if size is None:
        raise BadInputError(path, "no <size> in the annotation")
    width = int(_number(size, "width", path))
    height = int(_number(size, "height", path))
    depth = int(_number(size, "depth", path, default=0))
    if width <= 0 or height <= 0:
        raise BadInputError(path, f"<size> is {width}x{height}")
    objects = []
    for obj in root.iter("object"):
        name = (obj.findtext("name") or "").strip()
        box = obj.find("bndbox")
        if not name or box is None:
            raise BadInputError(path, "an <object> without <name> or <bndbox>")
        xmin, ymin, xmax, ymax = (
            _number(box, tag, path) for tag in ("xmin", "ymin", "xmax", "ymax")
        )
        objects.append(
            VocObject(
                name,
                xmin,
                ymin,
                xmax,
                ymax,
                difficult=int(_number(obj, "difficult", path, default=0)),
                truncated=int(_number(obj, "truncated", path, default=0)),
            )
        )
    return VocAnnotation(width, height, depth, objects)


class VocInspection(NamedTuple):
    """What inspect_voc checks and finds: all but the bytes of the image and its mask."""

    annotation: VocAnnotation
    header: ImageHeader
    mask_header: Optional[ImageHeader]  # None: no segmentation mask for this image


def _paths(voc_dir: str, image_id: str) -> Tuple[str, str, str]:
    return (
        os.path.join(voc_dir, "Annotations", f"{image_id}.xml"),
        os.path.join(voc_dir, "JPEGImages", f"{image_id}.jpg"),
        os.path.join(voc_dir, "SegmentationClass", f"{image_id}.png"),
    )


def inspect_voc(voc_dir: str, labels: Dict[str, int], image_id: str) -> VocInspection:
    """Parses and checks one image's annotation against its image's (and mask's) header, read
    from the first bytes of the files."""
    xml_path, image_path, mask_path = _paths(voc_dir, image_id)
    annotation = parse_annotation(xml_path)
    header = read_image_header(None, image_path)
    if (header.width, header.height) != (annotation.width, annotation.height):
        raise BadInputError(
            xml_path,
            f"<size> {annotation.width}x{annotation.height} differs "
            f"from the image's {header.width}x{header.height}",
        )
    if annotation.depth and annotation.depth != header.channels:
        raise BadInputError(
            xml_path,
            f"<depth> {annotation.depth} differs from the image's {header.channels} channels",
        )
    for obj in annotation.objects:
        if obj.name not in labels:
            raise BadInputError(xml_path, f"class {obj.name!r} is not in the label list")
    mask_header = None
    if os.path.isfile(mask_path):
        mask_header = read_image_header(None, mask_path, "segmentation mask")
        if (mask_header.width, mask_header.height) != (header.width, header.height):
            raise BadInputError(
                mask_path,
                f"segmentation mask is "
                f"{mask_header.width}x{mask_header.height}, the image "
                f"{header.width}x{header.height}",
            )
    return VocInspection(annotation, header, mask_header)


def build_voc_example(
    voc_dir: str, labels: Dict[str, int], image_id: str, inspected: Optional[VocInspection] = None
) -> bytes:
    """One serialized Example for one image id (see the module docstring for its features);
    ``inspected`` when :func:`inspect_voc` already ran (in a worker process)."""
    _, image_path, mask_path = _paths(voc_dir, image_id)
    if inspected is None:
        inspected = inspect_voc(voc_dir, labels, image_id)
    annotation, header, mask_header = inspected
    image = read_file(image_path, "image")
    objects = annotation.objects
    w, h = float(header.width), float(header.height)
    features = {
        "image/encoded": image,
        "image/format": header.format.encode(),
        "image/filename": f"{image_id}.jpg".encode(),
        "image/height": header.height,
        "image/width": header.width,
        "image/channels": header.channels,
        "image/shape": [header.height, header.width, header.channels],
        "image/object/bbox/xmin": Floats([o.xmin / w for o in objects]),
        "image/object/bbox/ymin": Floats([o.ymin / h for o in objects]),
        "image/object/bbox/xmax": Floats([o.xmax / w for o in objects]),
        "image/object/bbox/ymax": Floats([o.ymax / h for o in objects]),
        "image/object/bbox/label": Int64s([labels[o.name] for o in objects]),
        "image/object/bbox/label_text": Bytes([o.name.encode() for o in objects]),
        "image/object/bbox/difficult": Int64s([o.difficult for o in objects]),
        "image/object/bbox/truncated": Int64s([o.truncated for o in objects]),
    }
    if mask_header is not None:
        features["image/segmentation/class/encoded"] = read_file(mask_path, "segmentation mask")
        features["image/segmentation/class/format"] = mask_header.format.encode()
    return encode_example(features)


def convert_voc(
    voc_dir: PathLike,
    out_dir: PathLike,
    *,
    split: str = "train",
    labels: Union[None, PathLike, Sequence[str]] = None,
    prefix: Optional[str] = None,
    num_shards: Optional[int] = None,
    shard_size: Union[int, str, None] = None,
    records_per_shard: Optional[int] = None,
    compression: Optional[str] = None,
    index: bool = False,
    shuffle: bool = False,
    seed: int = 0,
    workers: int = 1,
    progress: Optional[bool] = None,
    strict: bool = False,
    overwrite: bool = False,
    storage_options: Optional[Mapping[str, Any]] = None,
    filesystem=None,
) -> ConvertSummary:
    """Converts the images of one split of a PASCAL VOC tree into shards
    ``{out_dir}/{prefix}-*`` (``prefix`` defaults to the split's name).

    See the module docstring for the layout, the features and the labels. The other options are
    those of :func:`~tfrec_fast.convert.convert_imagefolder`; images are written in the order of
    the split's list unless ``shuffle``.
    """
    started = time.perf_counter()
    options = WriteOptions(
        num_shards,
        shard_size,
        records_per_shard,
        compression,
        index,
        shuffle,
        seed,
        workers,
        progress,
        strict,
        overwrite,
        storage_options,
        filesystem,
    )
    voc_dir, out_dir = os.fspath(voc_dir), os.fspath(out_dir)
    prefix = split if prefix is None else prefix
    ids, _ = read_split(voc_dir, split)
    names = read_labels(labels)
    masks = os.path.join(voc_dir, "SegmentationClass")
    segmentation = os.path.isdir(masks) and any(
        os.path.isfile(os.path.join(masks, f"{i}.png")) for i in ids
    )
    label_of = {name: label for label, name in enumerate(names)}
    summary = write_jobs(
        shuffled(ids, options),
        functools.partial(build_voc_example, voc_dir, label_of),
        out_dir,
        prefix,
        voc_spec(segmentation),
        options,
        desc="images",
        unit="img",
        started=started,
        inspect=functools.partial(inspect_voc, voc_dir, label_of),
    )
    summary.label_map = output_path(out_dir, f"{prefix}.labels.txt", options)
    if not _is_file(labels, summary.label_map):  # else it is the label map already: keep it
        write_text_file(summary.label_map, "".join(name + "\n" for name in names), options)
    return summary


def _is_file(labels, path: str) -> bool:
    """Whether ``labels`` names the file at ``path`` (the label map of an earlier run, say)."""
    return isinstance(labels, (str, os.PathLike)) and same_file(labels, path)
