"""The ``tfrec-fast`` command line: count, verify and benchmark TFRecord files."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence

from .errors import DataLossError
from .records import TFRecordReader, detect_compression, normalize_compression


def _compression_arg(value: str) -> Optional[str]:
    return None if value == "auto" else normalize_compression(value)


class _Progress:
    """A tqdm bar counting file bytes, shown only on a terminal and only when tqdm is installed."""

    def __init__(self, files, desc):
        self.bar = None
        if not sys.stderr.isatty():
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        total = sum(os.path.getsize(f) for f in files if os.path.isfile(f))
        self.bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, file=sys.stderr,
                        leave=False)

    def advance(self, nbytes):
        if self.bar is not None:
            self.bar.update(nbytes)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _open(path, compression) -> TFRecordReader:
    if compression is None:
        compression = detect_compression(path)
    return TFRecordReader(path, compression)


def _for_each_file(files, desc, action) -> int:
    """Runs action(path, progress) on each file; damage is reported and makes the status 1."""
    status = 0
    progress = _Progress(files, desc)
    for path in files:
        try:
            action(path, progress)
        except DataLossError as error:
            print(f"DAMAGED {error}", file=sys.stderr, flush=True)
            status = 1
        except OSError as error:
            print(f"ERROR {path}: {error}", file=sys.stderr, flush=True)
            status = 1
    progress.close()
    return status


def cmd_count(args) -> int:
    total = 0

    def count(path, progress):
        nonlocal total
        with _open(path, args.compression) as reader:
            n = reader.count()
        total += n
        progress.advance(os.path.getsize(path))
        print(f"{n}\t{path}")

    status = _for_each_file(args.files, "count", count)
    if len(args.files) > 1:
        print(f"{total}\ttotal")
    return status


def cmd_verify(args) -> int:
    def verify(path, progress):
        records = nbytes = position = 0
        with _open(path, args.compression) as reader:
            for batch in reader.iter_batches(max_bytes=4 << 20):
                records += len(batch)
                nbytes += batch.nbytes
                if not reader.compressed:  # offsets of compressed files count inflated bytes
                    progress.advance(reader.tell() - position)
                    position = reader.tell()
        progress.advance(os.path.getsize(path) - position)
        print(f"OK {path}: {records} records, {nbytes} payload bytes")

    return _for_each_file(args.files, "verify", verify)


def cmd_bench(args) -> int:
    from .bench import run_bench

    compression = args.compression
    if compression is None:
        compression = detect_compression(args.files[0])
    return run_bench(args.files, compression, repeat=args.repeat, peers=not args.no_peers)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfrec-fast", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name, func, help_text):
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("files", nargs="+", help="TFRecord files")
        p.add_argument("--compression", type=_compression_arg, default=None,
                       metavar="{auto,none,gzip,zlib}",
                       help="default: auto (detected from each file's first bytes)")
        p.set_defaults(func=func)
        return p

    add("count", cmd_count, "count records, reading only record headers")
    add("verify", cmd_verify, "check every record and both checksums; exit status 1 on damage")
    bench = add("bench", cmd_bench,
                "measure records/s and GB/s of reading with both CRCs, against TensorFlow and "
                "the tfrecord package when they are installed")
    bench.add_argument("--repeat", type=int, default=3, help="runs per reader (the median is shown)")
    bench.add_argument("--no-peers", action="store_true", help="skip TensorFlow and tfrecord")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
