"""The tfrec-fast command line: count, verify, index, benchmark and look into TFRecord files.

Every FILE may be a glob pattern (quoted, "train-*.tfrecord": matches sorted), - for stdin, or a
URL (s3://bucket/train-*.tfrecord, https://..., any fsspec protocol), configured by fsspec's
environment or --storage-option KEY=VALUE.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import os
import secrets
import shutil
import sys
import tempfile
from typing import Iterator, List, Optional, Sequence, Union

from ._cli_options import add_storage_option
from ._progress import Progress
from ._version import __version__
from .convert.cli import add_convert_parser
from .errors import DataLossError, ExampleParseError
from .records import COMPRESSIONS, TFRecordReader, TFRecordWriter
from .storage import Location, display, expand, options_for, redact, resolve

STDIN = "-"


def _options(args, path) -> Optional[dict]:
    """The --storage-option values that apply to a path (those for fsspec: URLs only)."""
    return options_for(path, dict(args.storage_options))


def _positive_arg(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {n}")
    return n


def _count_arg(value: str) -> int:
    n = int(value)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {n}")
    return n


# ---- inputs and errors ---------------------------------------------------------------------------

File = Union[str, Location]  # STDIN, or a file of a store


def _display(path) -> str:
    return "<stdin>" if path == STDIN else display(path)


def _expand(args, arg: str) -> List[File]:
    """A FILE argument -> the files it names (- stays stdin)."""
    files: List[File] = [STDIN] if arg == STDIN else list(expand(arg, _options(args, arg)))
    return files


def _one_file(args, arg: str) -> File:
    files = _expand(args, arg)
    if len(files) > 1:
        raise ValueError(f"matches {len(files)} files ({_display(files[0])}, ...): give one file")
    return files[0]


def _size(path: File) -> int:
    """Bytes of a file, for the progress bar: from its listing, or of a regular local file (0
    for stdin, pipes and the missing)."""
    if path == STDIN:
        return 0
    assert isinstance(path, Location)
    stat = path.known_stat
    if stat is not None and stat.size is not None:
        return stat.size
    os_path = path.os_path
    try:
        return os.path.getsize(os_path) if os_path is not None and os.path.isfile(os_path) else 0
    except OSError:
        return 0


def _open(args, path: File, compression, **options) -> TFRecordReader:
    if path == STDIN:
        return TFRecordReader(sys.stdin.buffer, compression, **options)
    return TFRecordReader(path, compression, storage_options=_options(args, path), **options)


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error)


def _report(path, error) -> int:
    """Prints a reading error after what was printed before it; the exit status is 1.

    Damage is ``DAMAGED <the DataLossError>``, anything else ``ERROR <path>: <reason>``."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _broken_pipe()
    if isinstance(error, DataLossError):
        print(f"DAMAGED {error}", file=sys.stderr, flush=True)
    elif isinstance(error, ExampleParseError):
        print(f"ERROR {error}", file=sys.stderr, flush=True)
    else:
        name = getattr(error, "filename", None) or path
        if not isinstance(name, Location):
            name = os.fsdecode(name)
        print(f"ERROR {_display(name)}: {redact(_reason(error))}", file=sys.stderr, flush=True)
    return 1


def _for_each_file(args, desc, action) -> int:
    """Runs action(path, progress) on each file the FILE arguments name; an argument naming
    nothing, damage or an unreadable file is reported and makes the status 1."""
    status = 0
    files = []
    for arg in args.files:
        try:
            files.extend(_expand(args, arg))
        except OSError as error:
            status = _report(arg, error)
    progress = Progress(sum(_size(f) for f in files), desc, unit="B")
    for path in files:
        try:
            action(path, progress)
        except (OSError, ValueError) as error:
            status = _report(path, error)
    progress.close()
    return status


@contextlib.contextmanager
def _replacing(path: str, storage_options) -> Iterator[Location]:
    """A temporary file beside ``path``, renamed to it only when the block succeeds: a failed
    or interrupted write leaves ``path`` as it was (of a store: the temporary object is copied
    to its name, then removed)."""
    target = resolve(path, storage_options)  # a file:// URL is a local path
    temp = target.parent.join(f".{target.basename}.tmp-{secrets.token_hex(4)}")
    try:
        yield temp
        temp.rename(target)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.remove()
        raise


def _same_file(args, a: File, b: str) -> bool:
    return a != STDIN and resolve(a).same_file(resolve(b, _options(args, b)))


# ---- commands ------------------------------------------------------------------------------------


def cmd_count(args) -> int:
    total = 0
    counted = 0

    def count(path, progress):
        nonlocal total, counted
        with _open(args, path, args.compression) as reader:
            n = reader.count()
        total += n
        counted += 1
        progress.advance(_size(path))
        print(f"{n}\t{_display(path)}")

    status = _for_each_file(args, "count", count)
    if counted > 1 or len(args.files) > 1:
        print(f"{total}\ttotal")
    return status


def cmd_repair(args) -> int:
    """verify --repair OUT: copies every intact record of the one input file to OUT (with the
    input's compression), reporting each damaged stretch skipped; exit status 1 if any.

    OUT is written under a temporary name and renamed at the end, so it is never half written;
    OUT being the input itself is refused."""
    try:
        files = [f for arg in args.files for f in _expand(args, arg)]
    except OSError as error:
        return _report(error.filename, error)
    if len(files) != 1:
        print(f"ERROR --repair takes exactly one input file, not {len(files)}", file=sys.stderr)
        return 2
    path, out = files[0], args.repair
    if _same_file(args, path, out):
        print(
            f"ERROR {_display(out)}: is the input file {_display(path)} itself; --repair "
            "writes a new file, give it another path (nothing was written)",
            file=sys.stderr,
        )
        return 2
    records = 0
    try:
        with (
            _open(args, path, args.compression, skip_corrupt=True) as reader,
            _replacing(out, _options(args, out)) as temp,
            TFRecordWriter(temp, reader.compression or None) as writer,
        ):
            for batch in reader.iter_batches(max_bytes=4 << 20):
                writer.write_batch(batch)
                records += len(batch)
    except (OSError, ValueError) as error:
        return _report(path, error)
    for damage in reader.skipped:
        print(f"SKIPPED {damage}", file=sys.stderr, flush=True)
    print(
        f"{'REPAIRED' if reader.skipped else 'OK'} {_display(path)}: {records} intact records "
        f"written to {_display(out)}, {len(reader.skipped)} damaged stretches skipped"
    )
    return 1 if reader.skipped else 0


def cmd_verify(args) -> int:
    if args.repair:
        return cmd_repair(args)

    def verify(path, progress):
        records = nbytes = position = 0
        with _open(args, path, args.compression) as reader:
            for batch in reader.iter_batches(max_bytes=4 << 20):
                records += len(batch)
                nbytes += batch.nbytes
                if not reader.compressed:  # offsets of compressed files count inflated bytes
                    progress.advance(reader.tell() - position)
                    position = reader.tell()
        progress.advance(max(0, _size(path) - position))
        print(f"OK {_display(path)}: {records} records, {nbytes} payload bytes")

    return _for_each_file(args, "verify", verify)


def cmd_index(args) -> int:
    from .index import create_index

    def index(path, progress):
        if path == STDIN:
            raise ValueError(
                "an index needs a file to point into, not a stream: save it to a file first"
            )
        assert isinstance(path, Location)
        offsets, _ = create_index(path, path.with_suffix(args.suffix), compression=args.compression)
        progress.advance(_size(path))
        print(f"{len(offsets)}\t{_display(path.with_suffix(args.suffix))}")

    return _for_each_file(args, "index", index)


def cmd_bench(args) -> int:
    """Reading speed, in this process: batched and record by record, both CRCs checked.
    (bench/ in the repository compares with TensorFlow, the tfrecord package and Parquet.)"""
    try:
        files = [
            f.url if isinstance(f, Location) else f
            for arg in args.files
            for f in _expand(args, arg)
        ]
    except OSError as error:
        return _report(error.filename, error)
    with contextlib.ExitStack() as stack:
        if STDIN in files:  # read several times: keep a copy of it
            copy = stack.enter_context(tempfile.NamedTemporaryFile(suffix=".tfrecord"))
            shutil.copyfileobj(sys.stdin.buffer, copy)
            copy.flush()
            files = [copy.name if f == STDIN else f for f in files]
        try:
            return _bench(files, args.compression, args.repeat, dict(args.storage_options))
        except (OSError, ValueError) as error:
            return _report(getattr(error, "path", None) or files[0], error)


def _bench(files, compression: str, repeat: int, storage_options: dict) -> int:
    import statistics
    import time

    from .records import read_batches, read_records

    options = options_for(files[0], storage_options)
    records = payload = 0
    for batch in read_batches(files, compression, storage_options=options):  # damage reported here
        records, payload = records + len(batch), payload + batch.nbytes
    readers = {
        "tfrec_fast batched (read_batches)": lambda: sum(
            len(b) for b in read_batches(files, compression, storage_options=options)
        ),
        "tfrec_fast per record (read_records)": lambda: sum(
            1 for _ in read_records(files, compression, storage_options=options)
        ),
    }
    print(
        f"{records:,} records, {payload / 1e6:.1f} MB of payload; median of {repeat} runs "
        f"after 1 warm-up\n"
    )
    print("| reader | records/s | GB/s (payload) | seconds |\n|---|---:|---:|---:|")
    for label, run in readers.items():
        run()
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            n = run()
            if n != records:
                raise ValueError(
                    f"{label} read {n:,} records, not {records:,}: was the file "
                    "rewritten meanwhile?"
                )
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        print(
            f"| {label} | {records / median:,.0f} | {payload / 1e9 / median:.3f} | {median:.4f} |"
        )
    return 0


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


def cmd_cat(args) -> int:
    from .describe import JsonFormatter, iter_records, parse_record

    formatter = JsonFormatter(args.max_bytes, args.base64, ensure_ascii=not _stdout_is_utf8())
    path = args.file
    try:
        path = _one_file(args, args.file)
        with _open(args, path, args.compression) as reader:
            for index, record in iter_records(reader, args.skip, args.limit or None):
                message = parse_record(record, index, _display(path), args.sequence)
                sys.stdout.write(formatter.message(message) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        return _broken_pipe()
    except (OSError, ValueError) as error:  # ExampleParseError is a ValueError
        return _report(path, error)
    return 0


def cmd_schema(args) -> int:
    from .describe import SchemaBuilder, iter_records, parse_message

    builder = SchemaBuilder(args.sequence)
    limit = args.records or None
    path = args.file
    try:
        path = _one_file(args, args.file)
        with _open(args, path, args.compression) as reader:
            for index, record in iter_records(reader, 0, limit):
                builder.add(parse_message(record, index, _display(path), args.sequence))
    except (OSError, ValueError) as error:  # ExampleParseError is a ValueError
        return _report(path, error)
    complete = limit is None or builder.records < limit
    try:
        sys.stdout.write(builder.code(_display(path), complete, ascii_only=not _stdout_is_utf8()))
        sys.stdout.flush()
    except BrokenPipeError:
        return _broken_pipe()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfrec-fast", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"tfrec-fast {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name, func, help_text, one_file=False):
        p = sub.add_parser(name, help=help_text, description=help_text)
        if one_file:
            p.add_argument(
                "file",
                metavar="FILE",
                help="a TFRecord file, a glob pattern matching one, or - for stdin",
            )
        else:
            p.add_argument(
                "files",
                nargs="+",
                metavar="FILE",
                help='TFRecord files, glob patterns (quoted: "train-*.tfrecord"; '
                "matches sorted) or - for stdin",
            )
        p.add_argument(
            "--compression",
            type=str.lower,
            choices=COMPRESSIONS,
            default="auto",
            help="how the files are compressed (default: auto, told from each file's first bytes)",
        )
        add_storage_option(p)
        p.set_defaults(func=func)
        return p

    add("count", cmd_count, "count records, reading only record headers")
    verify = add(
        "verify", cmd_verify, "check every record and both checksums; exit status 1 on damage"
    )
    verify.add_argument(
        "--repair",
        metavar="OUT",
        help="write every intact record of the (single) input file to OUT, "
        "skipping damaged ones; OUT appears only once complete and may "
        "not be the input itself",
    )
    index = add(
        "index",
        cmd_index,
        'write FILE.idx next to each file: one "offset size" line per record, the index '
        "format of the tfrecord package and NVIDIA DALI (uncompressed files only)",
    )
    index.add_argument("--suffix", default=".idx", help="index file name suffix (default: .idx)")
    bench = add(
        "bench",
        cmd_bench,
        "measure records/s and GB/s of reading with both CRCs checked (bench/ in the "
        "repository compares with TensorFlow, the tfrecord package and Parquet)",
    )
    bench.add_argument(
        "--repeat", type=_positive_arg, default=3, help="runs per reader (the median is shown)"
    )
    # Earlier versions ran TensorFlow and tfrecord here; the option stays accepted for scripts.
    bench.add_argument("--no-peers", action="store_true", help=argparse.SUPPRESS)
    cat = add(
        "cat",
        cmd_cat,
        'print tf.train.Example records as JSON lines, {"feature": [values]}; exit status '
        "1 on damage or a record that is not an Example",
        one_file=True,
    )
    cat.add_argument(
        "--limit",
        type=_count_arg,
        default=10,
        metavar="N",
        help="records to print (default: 10; 0: all)",
    )
    cat.add_argument(
        "--skip", type=_count_arg, default=0, metavar="N", help="records to skip first"
    )
    cat.add_argument(
        "--max-bytes",
        type=_count_arg,
        default=32,
        metavar="N",
        help="cut bytes values after N bytes, noting their full length "
        "(default: 32; 0: never); printable UTF-8 is shown as text, the rest "
        "in hex (0x...)",
    )
    cat.add_argument("--base64", action="store_true", help="every bytes value whole, in base64")
    cat.add_argument(
        "--sequence",
        action="store_true",
        help="records are tf.train.SequenceExample: print "
        '{"context": {...}, "feature_lists": {name: [[values], ...]}}',
    )
    schema = add(
        "schema",
        cmd_schema,
        "infer a feature spec from the first records and print it as Python code",
        one_file=True,
    )
    schema.add_argument(
        "--records",
        type=_count_arg,
        default=1000,
        metavar="N",
        help="records to read (default: 1000; 0: all)",
    )
    schema.add_argument(
        "--sequence",
        action="store_true",
        help="records are tf.train.SequenceExample: print context_spec and sequence_spec",
    )
    add_convert_parser(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        return _broken_pipe()
    except (OSError, ValueError) as error:  # a last resort: one line, never a traceback
        return _report(getattr(error, "filename", None) or "tfrec-fast", error)


if __name__ == "__main__":
    raise SystemExit(main())
