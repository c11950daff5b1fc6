"""An image folder with one subdirectory per class -> sharded TFRecords of tf.train.Example.

Layout (the one torchvision's ImageFolder and Keras' image_dataset_from_directory read)::

    DIR/cat/0001.jpg
    DIR/cat/more/0002.png      <- class directories are searched recursively
    DIR/dog/0003.JPEG

Class names are the subdirectories of DIR, sorted; class ``i`` of that order has label ``i``.
Images are the files under a class directory (at any depth, symlinks followed) whose extension
is in ``extensions`` (any case); other files and files directly in DIR are passed over (counted in
``ignored``); hidden files and directories (``.name``) are left out entirely. Images are written
in class order, then by path (unless ``shuffle``).

Features of each Example (the keys TensorFlow's slim and object-detection readers use)::

    image/encoded       bytes   the file's bytes as they are (never re-encoded)
    image/format        bytes   Pillow's format name in lower case: b"jpeg", b"png", b"gif", ...
    image/class/label   int64   the class index
    image/class/text    bytes   the class name (the directory name)
    image/height        int64   from the image header (pixels are not decoded)
    image/width         int64
    image/filename      bytes   the path relative to DIR, with "/" separators

Beside the shards, ``{prefix}.labels.txt`` holds the class names, one a line: line ``i`` is the
name of label ``i``.
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ..encode import encode_example
from ..spec import FixedLen
from ._common import ConvertSummary, WriteOptions, output_path, write_text_file
from ._images import ImageHeader, read_file, read_image_header
from ._pipeline import shuffled, write_jobs

__all__ = ["IMAGE_EXTENSIONS", "convert_imagefolder", "find_images", "imagefolder_spec"]

IMAGE_EXTENSIONS = (
    ".jpg",
    ".jpeg",
    ".png",
    ".gif",
    ".bmp",
    ".webp",
    ".tif",
    ".tiff",
    ".ppm",
    ".pgm",
)

PathLike = Union[str, "os.PathLike[str]"]
Job = Tuple[str, int]  # (path relative to DIR with "/" separators, label)


def imagefolder_spec() -> dict:
    """The feature spec of the Examples written (what the manifest records)."""
    return {
        "image/encoded": FixedLen((), "bytes"),
        "image/format": FixedLen((), "bytes"),
        "image/class/label": FixedLen((), "int64"),
        "image/class/text": FixedLen((), "bytes"),
        "image/height": FixedLen((), "int64"),
        "image/width": FixedLen((), "int64"),
        "image/filename": FixedLen((), "bytes"),
    }


def _visible(names: Iterable[str]) -> List[str]:
    return sorted(n for n in names if not n.startswith("."))


def find_images(
    src_dir: PathLike, extensions: Sequence[str] = IMAGE_EXTENSIONS
) -> Tuple[List[str], List[Job], List[str]]:
    """(class names, [(relative path, label)], files passed over) of an image folder; paths are
    relative to ``src_dir``, with "/" separators."""
    src_dir = os.fspath(src_dir)
    if not os.path.isdir(src_dir):
        raise FileNotFoundError(f"not a directory: {src_dir}")
    wanted = tuple(e.lower() if e.startswith(".") else "." + e.lower() for e in extensions)
    entries = _visible(os.listdir(src_dir))
    classes = [n for n in entries if os.path.isdir(os.path.join(src_dir, n))]
    if not classes:
        raise ValueError(f"no class subdirectories in {src_dir}")
    ignored = [n for n in entries if n not in classes]
    jobs: List[Job] = []
    for label, name in enumerate(classes):
        for root, dirs, files in os.walk(os.path.join(src_dir, name), followlinks=True):
            dirs[:] = _visible(dirs)  # in place: os.walk descends in this (sorted) order
            rel_root = os.path.relpath(root, src_dir).replace(os.sep, "/")
            for file in _visible(files):
                if file.lower().endswith(wanted):
                    jobs.append((f"{rel_root}/{file}", label))
                else:
                    ignored.append(f"{rel_root}/{file}")
    return classes, jobs, ignored


def _image_path(src_dir: str, job: Job) -> str:
    return os.path.join(src_dir, *job[0].split("/"))


def inspect_image(src_dir: str, job: Job) -> ImageHeader:
    """The image's header, from the first bytes of its file (what worker processes do)."""
    return read_image_header(None, _image_path(src_dir, job))


def build_image_example(
    src_dir: str, classes: Sequence[str], job: Job, header: Optional[ImageHeader] = None
) -> bytes:
    """One serialized Example for one image (see the module docstring for its features);
    ``header`` when :func:`inspect_image` already read it."""
    rel_path, label = job
    path = _image_path(src_dir, job)
    data = read_file(path, "image")
    if header is None:
        header = read_image_header(data, path)
    return encode_example(
        {
            "image/encoded": data,
            "image/format": header.format.encode(),
            "image/class/label": label,
            "image/class/text": os.fsencode(classes[label]),
            "image/height": header.height,
            "image/width": header.width,
            "image/filename": os.fsencode(rel_path),
        }
    )


def convert_imagefolder(
    src_dir: PathLike,
    out_dir: PathLike,
    *,
    prefix: str = "train",
    extensions: Sequence[str] = IMAGE_EXTENSIONS,
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
    """Converts a class-per-subdirectory image folder into shards ``{out_dir}/{prefix}-*``.

    See the module docstring for the layout, the features and the label map file. Shards: at most
    one of ``num_shards``, ``shard_size`` (bytes, or a string like ``"128MB"``; the default is
    128 MiB) and ``records_per_shard``. ``compression``: None, ``"gzip"`` or ``"zlib"``.
    ``index`` writes an index file per shard. ``shuffle`` writes the images in an order
    permuted by ``seed`` (the same for the same seed). ``workers`` processes read the files
    (0: one per CPU) read the image headers while this process reads and writes the bytes; the
    output is the same for any number. On Linux they start by fork when this process runs no
    other thread, else by forkserver (spawn where there is none), so a script calling this with
    workers > 1 should do so under ``if __name__ == "__main__":``. ``progress``: a tqdm bar (default:
    when stderr is a terminal). A bad image (missing, unreadable, not an image) is skipped and
    listed in the summary, or with ``strict`` raises :class:`BadInputError` leaving no shard
    under a final name. ``overwrite`` replaces existing shards of the same prefix. ``out_dir``
    may be a URL (``s3://bucket/out``), with fsspec's ``storage_options``, or a path on
    ``filesystem`` (an fsspec or pyarrow filesystem).
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
    src_dir, out_dir = os.fspath(src_dir), os.fspath(out_dir)
    classes, jobs, ignored = find_images(src_dir, extensions)
    if any("\n" in name or "\r" in name for name in classes):
        raise ValueError("a class directory name holds a line break: the label map cannot hold it")
    build = functools.partial(build_image_example, src_dir, tuple(classes))
    summary = write_jobs(
        shuffled(jobs, options),
        build,
        out_dir,
        prefix,
        imagefolder_spec(),
        options,
        desc="images",
        unit="img",
        started=started,
        inspect=functools.partial(inspect_image, src_dir),
    )
    summary.ignored = len(ignored)
    summary.ignored_files = ignored
    summary.label_map = output_path(out_dir, f"{prefix}.labels.txt", options)
    write_text_file(summary.label_map, "".join(name + "\n" for name in classes), options)
    return summary
