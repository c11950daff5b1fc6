"""``tfrec-fast convert imagefolder|voc|numpy``: the converters on the command line."""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from .._cli_options import add_storage_option

__all__ = ["add_convert_parser"]


def _positive(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {n}")
    return n


def _workers(value: str) -> int:
    n = int(value)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (one per CPU) or more, not {n}")
    return n


def _size(value: str) -> int:
    from ._common import parse_size

    try:
        return parse_size(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _add_common(parser: argparse.ArgumentParser, prefix_help: str) -> None:
    parser.add_argument(
        "out",
        metavar="OUT",
        help="directory for the shards (created if needed), or a URL (s3://bucket/out, ...)",
    )
    parser.add_argument("--prefix", help=prefix_help)
    shards = parser.add_mutually_exclusive_group()
    shards.add_argument(
        "--num-shards",
        type=_positive,
        metavar="N",
        help="exactly N shards, records dealt round robin",
    )
    shards.add_argument(
        "--shard-size",
        type=_size,
        metavar="SIZE",
        help="cut a shard once it holds SIZE bytes: 500000, 64K, 128MB, 1G "
        "(binary units; the default is 128MB)",
    )
    shards.add_argument(
        "--records-per-shard", type=_positive, metavar="N", help="cut a shard every N records"
    )
    parser.add_argument(
        "--compression",
        choices=("none", "gzip", "zlib"),
        default="none",
        help="compress each shard (default: none)",
    )
    parser.add_argument(
        "--index", action="store_true", help="write an index file beside each shard"
    )
    parser.add_argument(
        "--shuffle",
        action="store_true",
        help="write the records in a random order, the same for the same --seed",
    )
    parser.add_argument("--seed", type=int, default=0, help="the --shuffle seed (default: 0)")
    parser.add_argument(
        "--workers",
        type=_workers,
        default=1,
        metavar="N",
        help="processes (threads for numpy) building the records; 0: one per "
        "CPU; the output does not depend on it (default: 1)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="stop at the first bad input (exit status 1, no shard left) instead of skipping it",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace existing shards of the same prefix"
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar (default: when stderr is a terminal)",
    )
    add_storage_option(parser)


def _common_kwargs(args) -> dict:
    return {
        "prefix": args.prefix,
        "num_shards": args.num_shards,
        "shard_size": args.shard_size,
        "records_per_shard": args.records_per_shard,
        "compression": args.compression,
        "index": args.index,
        "shuffle": args.shuffle,
        "seed": args.seed,
        "workers": args.workers,
        "progress": args.progress,
        "strict": args.strict,
        "overwrite": args.overwrite,
        "storage_options": dict(args.storage_options) or None,
    }


# The library's messages name keyword arguments; here they are options.
_OPTION_NAMES = {"overwrite=True": "--overwrite", "strict=True": "--strict"}


def _in_cli_words(message: str) -> str:
    for keyword, option in _OPTION_NAMES.items():
        message = message.replace(keyword, option)
    return message


def _run(convert: Callable, *positional, **kwargs) -> int:
    """Runs a converter: skipped inputs and the summary are reported; a failure is one ERROR
    line on stderr and exit status 1."""
    from ._common import BadInputError

    try:
        summary = convert(*positional, **kwargs)
    except BadInputError as error:
        print(f"ERROR {error} (--strict: nothing written)", file=sys.stderr, flush=True)
        return 1
    except (OSError, ValueError, KeyError, OverflowError, ImportError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(f"ERROR {_in_cli_words(str(message))}", file=sys.stderr, flush=True)
        return 1
    for path, reason in summary.skipped:
        print(f"SKIPPED {path}: {reason}", file=sys.stderr)
    sys.stderr.flush()
    print(summary)
    return 0


def _cmd_imagefolder(args) -> int:
    from .imagefolder import IMAGE_EXTENSIONS, convert_imagefolder

    kwargs = _common_kwargs(args)
    kwargs["prefix"] = kwargs["prefix"] or "train"
    extensions = args.extensions.split(",") if args.extensions else IMAGE_EXTENSIONS
    return _run(convert_imagefolder, args.src, args.out, extensions=extensions, **kwargs)


def _cmd_voc(args) -> int:
    from .voc import convert_voc

    return _run(
        convert_voc,
        args.src,
        args.out,
        split=args.split,
        labels=args.labels,
        **_common_kwargs(args),
    )


def _cmd_numpy(args) -> int:
    from .arrays import convert_numpy

    src = args.src
    if src == "-":  # np.load needs to seek: read stdin whole
        import io

        import numpy as np

        try:
            data = np.load(io.BytesIO(sys.stdin.buffer.read()), allow_pickle=False)
        except (OSError, ValueError) as error:
            data = error
        if not hasattr(data, "files"):
            print(f"ERROR <stdin>: not an .npz file ({data})", file=sys.stderr, flush=True)
            return 1
        with data:
            src = {name: data[name] for name in data.files}
    return _run(convert_numpy, src, args.out, keys=args.keys, **_common_kwargs(args))


def add_convert_parser(subparsers) -> argparse.ArgumentParser:
    """Adds ``convert`` and its three kinds to the ``tfrec-fast`` subcommands."""
    text = (
        "convert a dataset to sharded TFRecords of tf.train.Example, with a manifest whose "
        "spec reads them; prints a summary, and each skipped bad input on stderr"
    )
    convert = subparsers.add_parser("convert", help=text, description=text)
    kinds = convert.add_subparsers(dest="kind", required=True, metavar="KIND")

    text = (
        "images in one subdirectory per class (searched recursively; labels 0..K-1 in "
        "sorted class order, listed in OUT/PREFIX.labels.txt): image/encoded (the file's "
        "bytes), image/format, image/class/label, image/class/text, image/height, "
        "image/width, image/filename"
    )
    imagefolder = kinds.add_parser(
        "imagefolder", help="a class-per-subdirectory image folder", description=text
    )
    imagefolder.add_argument("src", metavar="DIR", help="the image folder")
    _add_common(imagefolder, "shard name prefix (default: train)")
    imagefolder.add_argument(
        "--extensions",
        metavar="EXT,EXT",
        help="image file extensions, any case (default: jpg,jpeg,png,gif,"
        "bmp,webp,tif,tiff,ppm,pgm)",
    )
    imagefolder.set_defaults(func=_cmd_imagefolder)

    text = (
        "PASCAL VOC: JPEGImages/, Annotations/*.xml, ImageSets/Main/SPLIT.txt (or "
        "ImageSets/Segmentation/SPLIT.txt), optional SegmentationClass/*.png; the keys of "
        "SSD's and deeplab's converters (image/*, image/object/bbox/*, "
        "image/segmentation/class/*)"
    )
    voc = kinds.add_parser(
        "voc", help="a PASCAL VOC tree (boxes, segmentation masks)", description=text
    )
    voc.add_argument("src", metavar="DIR", help="the VOC directory, e.g. VOCdevkit/VOC2007")
    _add_common(voc, "shard name prefix (default: the split)")
    voc.add_argument("--split", default="train", help="the image list to convert (default: train)")
    voc.add_argument(
        "--labels",
        metavar="FILE",
        help="class names one a line, line i naming label i (default: none=0 "
        "(background), then the 20 VOC classes 1..20, as SSD numbers them)",
    )
    voc.set_defaults(func=_cmd_voc)

    text = (
        "arrays of an .npz file sharing their first dimension, one Example per row: rank-1 "
        "numbers -> one int64 or float, strings -> bytes, rank > 1 -> the row's raw bytes "
        "plus KEY/shape and KEY/dtype"
    )
    numpy = kinds.add_parser(
        "numpy", help="arrays of an .npz file, one Example per row", description=text
    )
    numpy.add_argument("src", metavar="FILE.npz", help="the .npz file (- for stdin)")
    _add_common(numpy, "shard name prefix (default: the file's name without .npz)")
    numpy.add_argument(
        "--key",
        dest="keys",
        action="append",
        metavar="NAME",
        help="an array to convert, repeatable (default: all)",
    )
    numpy.set_defaults(func=_cmd_numpy)
    return convert
