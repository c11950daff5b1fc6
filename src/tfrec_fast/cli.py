"""The ``tfrec-fast`` command line: count, verify and benchmark TFRecord files."""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from .errors import DataLossError
from .records import TFRecordReader, detect_compression, normalize_compression


def _compression_arg(value: str) -> Optional[str]:
    return None if value == "auto" else normalize_compression(value)


def _progress(total_files: int, desc: str):
    """A tqdm bar over files when stderr is a terminal and tqdm is installed, else None."""
    if total_files < 2 or not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total_files, desc=desc, unit="file", file=sys.stderr, leave=False)


def _open(path, compression) -> TFRecordReader:
    if compression is None:
        compression = detect_compression(path)
    return TFRecordReader(path, compression)


def _for_each_file(files, desc, action) -> int:
    """Runs action(path) on each file; damage is reported and makes the exit status 1."""
    status = 0
    bar = _progress(len(files), desc)
    for path in files:
        try:
            action(path)
        except DataLossError as error:
            print(f"DAMAGED {error}", file=sys.stderr, flush=True)
            status = 1
        except OSError as error:
            print(f"ERROR {path}: {error}", file=sys.stderr, flush=True)
            status = 1
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return status


def cmd_count(args) -> int:
    total = 0

    def count(path):
        nonlocal total
        with _open(path, args.compression) as reader:
            n = reader.count()
        total += n
        print(f"{n}\t{path}")

    status = _for_each_file(args.files, "count", count)
    if len(args.files) > 1:
        print(f"{total}\ttotal")
    return status


def cmd_verify(args) -> int:
    def verify(path):
        records = nbytes = 0
        with _open(path, args.compression) as reader:
            for batch in reader.iter_batches():
                records += len(batch)
                nbytes += batch.nbytes
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
