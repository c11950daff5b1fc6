#!/usr/bin/env python3
"""tfrec_fast.arrow against read_examples on the same file (numpy columns, the same batch size):
read_table against every batch of read_examples kept in a list, iter_batches against
read_examples streamed (each batch dropped); the Arrow hand-over should be nearly free (issue
target: within 1.2x of read_examples' time). For reference: parse_examples on records already in
memory, and Parquet (the same table written as Parquet, read by pyarrow.parquet.read_table with 1
thread and with all threads).

    python bench/bench_arrow.py [--repeats 7] [--datasets mnist,tutorial,voc] [--records N]
                                [--batch-size 4096]

Data: bench/make_example_data.py's generators (MNIST-like, TF tutorial, VOC-like), written to a
temporary directory (page cache warm) by a process of its own, with the Parquet copy. Each case
runs in its own process through the harness (bench/harness.py): round-robin after a
warm-up, median of --repeats; every case must hand over all the records, and the Arrow rows'
first integer column is compared with read_examples' after the warm-up.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

import _common as C
import make_example_data as D
from _common import harness as H

BATCH_SIZE = 4096
TARGET_WITHIN = 1.2  # the Arrow rows' time at most 1.2x read_examples'

# ---- data (written in a process of its own) ------------------------------------------------------


def write_data(opts) -> dict:
    """The data set and its Parquet copy (uncompressed, from arrow.read_table) in opts.dir."""
    made = D.write_temp(opts)
    try:
        pq = H.need("pyarrow.parquet")
    except H.Skip as why:
        return dict(made, parquet=None, pyarrow=str(why))
    from tfrec_fast import arrow as ta

    parquet = os.path.join(opts.dir, opts.dataset + ".parquet")
    pq.write_table(
        ta.read_table(made["file"], D.tfrec_fast_spec(opts.dataset)), parquet, compression="none"
    )
    return dict(made, parquet=parquet, pyarrow=H.need("pyarrow").__version__)


# ---- cases -----------------------------------------------------------------------------------------


def _rows(columns: dict) -> int:
    """Rows of one read_examples batch (a dict of columns; the first is a FixedLen one)."""
    return len(next(iter(columns.values())))


def _check_key(name: str) -> str:
    """The first int64 FixedLen feature of a data set: the column the Arrow rows' check compares."""
    return next(
        k
        for k, (layout, kind) in D.EXAMPLE_SPECS[name].items()
        if (layout, kind) == ("fixed", "int64")
    )


def _setup(opts):
    tfr = H.need("tfrec_fast")
    return tfr, D.tfrec_fast_spec(opts.dataset), opts.batch_size


def _arrow_check(opts, tfr, spec, values):
    """check(): the Arrow output's first int64 column equals read_examples' (``values()``: its numpy)."""
    import numpy as np

    key = _check_key(opts.dataset)

    def check():
        want = np.concatenate(
            [b[key] for b in tfr.read_examples(opts.file, spec, batch_size=opts.batch_size)]
        )
        got = values(key)
        return None if np.array_equal(got, want) else f"column {key} differs from read_examples'"

    return check


def kept(opts):
    tfr, spec, bs = _setup(opts)

    def run():
        batches = list(tfr.read_examples(opts.file, spec, batch_size=bs))
        return sum(map(_rows, batches))

    return H.Body(
        run,
        info=f"list(read_examples(file, spec, batch_size={bs})): numpy columns, every batch kept",
    )


def streamed(opts):
    tfr, spec, bs = _setup(opts)
    return H.Body(lambda: sum(map(_rows, tfr.read_examples(opts.file, spec, batch_size=bs))))


def arrow_table(opts):
    tfr, spec, bs = _setup(opts)
    H.need("pyarrow")
    from tfrec_fast import arrow as ta

    def values(key):
        return ta.read_table(opts.file, spec, batch_size=bs).column(key).to_numpy()

    return H.Body(
        lambda: ta.read_table(opts.file, spec, batch_size=bs).num_rows,
        check=_arrow_check(opts, tfr, spec, values),
    )


def arrow_batches(opts):
    tfr, spec, bs = _setup(opts)
    pa = H.need("pyarrow")
    from tfrec_fast import arrow as ta

    def values(key):
        return (
            pa.Table.from_batches(list(ta.iter_batches(opts.file, spec, batch_size=bs)))
            .column(key)
            .to_numpy()
        )

    return H.Body(
        H.summing(lambda: ta.iter_batches(opts.file, spec, batch_size=bs)),
        check=_arrow_check(opts, tfr, spec, values),
    )


def parse_in_memory(opts):
    tfr, spec, _ = _setup(opts)
    batch = tfr.RecordBatch.from_records(tfr.read_records(opts.file))

    def run():
        tfr.parse_examples(batch, spec)
        return len(batch)

    return H.Body(
        run, info="parse_examples(one RecordBatch of every record, read in setup) -> numpy columns"
    )


def _parquet(opts, threads: bool):
    if not opts.parquet:
        raise H.Skip("no Parquet copy (pyarrow missing)")
    pq = H.need("pyarrow.parquet")
    return H.Body(
        lambda: pq.read_table(opts.parquet, use_threads=threads).num_rows,
        info=f"uncompressed Parquet of the same table, use_threads={threads} ({os.cpu_count()} CPUs)",
    )


def parquet_1(opts):
    return _parquet(opts, False)


def parquet_all(opts):
    return _parquet(opts, True)


CASES = [
    H.Case("kept", "read_examples, every batch kept (list)", kept),
    H.Case("arrow_table", "arrow.read_table (file -> pyarrow.Table)", arrow_table),
    H.Case("streamed", "read_examples, streamed (each batch dropped)", streamed),
    H.Case("arrow_batches", "arrow.iter_batches, streamed", arrow_batches),
    H.Case("parse", "parse_examples (records in memory -> columns)", parse_in_memory),
    H.Case("parquet_1", "pyarrow.parquet.read_table, 1 thread", parquet_1),
    H.Case("parquet_all", "pyarrow.parquet.read_table, all threads", parquet_all),
]


def columns(n: int):
    return [
        H.per_second("records/s", n),
        H.Versus(
            "vs read_examples kept",
            "kept",
            within=TARGET_WITHIN,
            mine=lambda r: r.name == "arrow_table",
        ),
        H.Versus(
            "vs read_examples streamed",
            "streamed",
            within=TARGET_WITHIN,
            mine=lambda r: r.name == "arrow_batches",
        ),
        H.Versus("vs Parquet 1 thread", "parquet_1"),
        H.figure("CPU s", lambda r: statistics.median(r.extra["cpu_s"]), ".4f"),
        *H.timing(".4f"),
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    H.add_arguments(ap, repeats=7, min_time=0.5)
    ap.add_argument(
        "--datasets", default="mnist,tutorial,voc", help="comma list: mnist, tutorial, voc"
    )
    ap.add_argument("--records", type=int, default=0, help="records per data set (0: its default)")
    ap.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    args = ap.parse_args(argv)
    md, raw, summary = [], {}, []
    with tempfile.TemporaryDirectory() as tmp:
        for name in [d.strip() for d in args.datasets.split(",") if d.strip()]:
            print(f"== arrow {name}", file=sys.stderr)
            made = H.call(
                write_data,
                {"dir": tmp, "dataset": name, "records": args.records},
                log_dir=C.log_dir(f"arrow-data-{name}"),
            )
            if not md:
                md.append(
                    C.header(
                        args,
                        f"tfrec_fast {made['tfrec_fast']}, pyarrow {made['pyarrow']}, batch_size "
                        f"{args.batch_size}. Ratios >1: faster than that row. ✅/❌: the Arrow "
                        f"hand-over's target, within {TARGET_WITHIN:g}x read_examples' time. "
                        "'CPU s': the case process's CPU time per run (all its threads).",
                    )
                )
            opts = {
                "file": made["file"],
                "parquet": made["parquet"],
                "dataset": name,
                "batch_size": args.batch_size,
            }
            res = H.measure(
                H.select(CASES, args.cases),
                opts,
                log_dir=C.log_dir(f"arrow-{name}"),
                **H.timing_options(args),
            )
            n = made["n_records"]
            H.expect_records(res, n)
            cols = columns(n)
            text, notes = H.table(res, cols)
            md.append(
                H.section(
                    f"{made['label']} ({n:,} records, {made['file_bytes'] / 1e6:.1f} MB)",
                    text,
                    notes,
                )
            )
            summary += H.targets(res, cols, f"arrow {name}")
            raw[name] = H.raw(res)
    return H.emit(md, raw, args.markdown, args.json, summary)


if __name__ == "__main__":
    sys.exit(main())
