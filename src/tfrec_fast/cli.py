"""The ``tfrec-fast`` command line: count, verify, benchmark and look into TFRecord files."""

from __future__ import annotations

import argparse
import codecs
import os
import sys
from typing import Optional, Sequence

from .convert.cli import add_convert_parser
from .errors import DataLossError, ExampleParseError
from .records import TFRecordReader, detect_compression, normalize_compression


def _compression_arg(value: str) -> Optional[str]:
    return None if value == "auto" else normalize_compression(value)


def _count_arg(value: str) -> int:
    n = int(value)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {n}")
    return n


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


def _open(path, compression, **options) -> TFRecordReader:
    if compression is None:
        compression = detect_compression(path)
    return TFRecordReader(path, compression, **options)


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


def cmd_repair(args) -> int:
    """verify --repair OUT: copies every intact record of the one input file to OUT (with the
    input's compression), reporting each damaged stretch skipped; exit status 1 if any."""
    from .records import TFRecordWriter

    if len(args.files) != 1:
        print("ERROR --repair takes exactly one input file", file=sys.stderr)
        return 2
    path = args.files[0]
    compression = args.compression
    if compression is None:
        compression = detect_compression(path)
    records = 0
    with _open(path, compression, skip_corrupt=True) as reader, \
            TFRecordWriter(args.repair, compression or None) as writer:
        for batch in reader.iter_batches(max_bytes=4 << 20):
            writer.write_batch(batch)
            records += len(batch)
    for error in reader.skipped:
        print(f"SKIPPED {error}", file=sys.stderr, flush=True)
    print(f"{'REPAIRED' if reader.skipped else 'OK'} {path}: {records} intact records written "
          f"to {args.repair}, {len(reader.skipped)} damaged stretches skipped")
    return 1 if reader.skipped else 0


def cmd_verify(args) -> int:
    if args.repair:
        return cmd_repair(args)

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


def cmd_index(args) -> int:
    from .index import create_index

    status = 0

    def index(path, progress):
        nonlocal status
        try:
            offsets, _ = create_index(path, path + args.suffix, compression=args.compression)
        except ValueError as error:  # compressed: no random access into it
            print(f"ERROR {error}", file=sys.stderr, flush=True)
            status = 1
            return
        progress.advance(os.path.getsize(path))
        print(f"{len(offsets)}\t{path + args.suffix}")

    return _for_each_file(args.files, "index", index) or status


def cmd_bench(args) -> int:
    from .bench import run_bench

    compression = args.compression
    if compression is None:
        compression = detect_compression(args.files[0])
    return run_bench(args.files, compression, repeat=args.repeat, peers=not args.no_peers)


def _stdout_is_utf8() -> bool:
    try:
        return codecs.lookup(sys.stdout.encoding or "ascii").name == "utf-8"
    except LookupError:
        return False


def _broken_pipe() -> int:
    """Whoever read stdout has gone (`| head`): stop quietly, also when Python flushes at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 0


def _report(path, error) -> int:
    """Prints a reading error after what was printed before it; the exit status is 1."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _broken_pipe()
    if isinstance(error, DataLossError):
        print(f"DAMAGED {error}", file=sys.stderr, flush=True)
    elif isinstance(error, ExampleParseError):
        print(f"ERROR {error}", file=sys.stderr, flush=True)
    else:
        print(f"ERROR {path}: {error}", file=sys.stderr, flush=True)
    return 1


def cmd_cat(args) -> int:
    from .describe import JsonFormatter, iter_records, parse_message

    formatter = JsonFormatter(args.max_bytes, args.base64, ensure_ascii=not _stdout_is_utf8())
    try:
        with _open(args.file, args.compression) as reader:
            for index, record in iter_records(reader, args.skip, args.limit or None):
                message = parse_message(record, index, args.file, args.sequence)
                sys.stdout.write(formatter.message(message) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        return _broken_pipe()
    except (ExampleParseError, OSError) as error:
        return _report(args.file, error)
    return 0


def cmd_schema(args) -> int:
    from .describe import SchemaBuilder, iter_records, parse_message

    builder = SchemaBuilder(args.sequence)
    limit = args.records or None
    try:
        with _open(args.file, args.compression) as reader:
            for index, record in iter_records(reader, 0, limit):
                builder.add(parse_message(record, index, args.file, args.sequence))
    except (ExampleParseError, OSError) as error:
        return _report(args.file, error)
    complete = limit is None or builder.records < limit
    try:
        sys.stdout.write(builder.code(args.file, complete, ascii_only=not _stdout_is_utf8()))
        sys.stdout.flush()
    except BrokenPipeError:
        return _broken_pipe()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfrec-fast", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name, func, help_text, one_file=False):
        p = sub.add_parser(name, help=help_text, description=help_text)
        if one_file:
            p.add_argument("file", help="a TFRecord file")
        else:
            p.add_argument("files", nargs="+", help="TFRecord files")
        p.add_argument("--compression", type=_compression_arg, default=None,
                       metavar="{auto,none,gzip,zlib}",
                       help="default: auto (detected from each file's first bytes)")
        p.set_defaults(func=func)
        return p

    add("count", cmd_count, "count records, reading only record headers")
    verify = add("verify", cmd_verify,
                 "check every record and both checksums; exit status 1 on damage")
    verify.add_argument("--repair", metavar="OUT",
                        help="write every intact record of the (single) input file to OUT, "
                             "skipping damaged ones")
    index = add("index", cmd_index,
                "write FILE.idx next to each file: one \"offset size\" line per record, the index "
                "format of the tfrecord package and NVIDIA DALI (uncompressed files only)")
    index.add_argument("--suffix", default=".idx", help="index file name suffix (default: .idx)")
    bench = add("bench", cmd_bench,
                "measure records/s and GB/s of reading with both CRCs, against TensorFlow and "
                "the tfrecord package when they are installed")
    bench.add_argument("--repeat", type=int, default=3, help="runs per reader (the median is shown)")
    bench.add_argument("--no-peers", action="store_true", help="skip TensorFlow and tfrecord")
    cat = add("cat", cmd_cat,
              "print tf.train.Example records as JSON lines, {\"feature\": [values]}; exit status "
              "1 on damage or a record that is not an Example", one_file=True)
    cat.add_argument("--limit", type=_count_arg, default=10, metavar="N",
                     help="records to print (default: 10; 0: all)")
    cat.add_argument("--skip", type=_count_arg, default=0, metavar="N",
                     help="records to skip first")
    cat.add_argument("--max-bytes", type=_count_arg, default=32, metavar="N",
                     help="cut bytes values after N bytes, noting their full length "
                          "(default: 32; 0: never); printable UTF-8 is shown as text, the rest "
                          "in hex (0x...)")
    cat.add_argument("--base64", action="store_true",
                     help="every bytes value whole, in base64")
    cat.add_argument("--sequence", action="store_true",
                     help="records are tf.train.SequenceExample: print "
                          "{\"context\": {...}, \"feature_lists\": {name: [[values], ...]}}")
    schema = add("schema", cmd_schema,
                 "infer a feature spec from the first records and print it as Python code",
                 one_file=True)
    schema.add_argument("--records", type=_count_arg, default=1000, metavar="N",
                        help="records to read (default: 1000; 0: all)")
    schema.add_argument("--sequence", action="store_true",
                        help="records are tf.train.SequenceExample: print context_spec and "
                             "sequence_spec")
    add_convert_parser(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
