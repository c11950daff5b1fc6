#!/usr/bin/env python3
"""CRC32C throughput (GB/s) on 4 KiB, 64 KiB, 1 MiB and 64 MiB buffers, all implementations in this run:
tfrec_fast.crc32c, every backend via tfrec_fast._core.crc32c_with, the `crc32c` package and
google_crc32c.value. Ratios are against the `crc32c` package. A run is as many calls as make 16 MiB
(at least one) on the same buffer; every implementation must give the same checksum, else its row
says MISMATCH.
"""

from __future__ import annotations

import argparse
import functools
import sys

import _common as C
from _common import harness as H

SIZES = {"4 KiB": 4 << 10, "64 KiB": 64 << 10, "1 MiB": 1 << 20, "64 MiB": 64 << 20}


def _body(opts, crc, info):
    import numpy as np

    data = np.random.default_rng(opts.size).bytes(opts.size)  # bytes: the one type all accept
    calls = max(1, (16 << 20) // opts.size)

    def run():
        for _ in range(calls):
            crc(data)
        return calls

    return H.Body(run, info=info, extras=lambda: {"checksum": crc(data)})


def crc_tfrec_fast(opts):
    tfr = H.need("tfrec_fast")
    return _body(opts, tfr.crc32c, f"backend {tfr.crc32c_backend()}")


def crc_backend(opts):
    """Case name backend_<name>: tfrec_fast._core.crc32c_with(<name>, data)."""
    core = H.need("tfrec_fast._core")
    backend = opts.case.split("_", 1)[1]
    return _body(opts, functools.partial(core.crc32c_with, backend), "")


def crc_package(opts):
    crc32c = H.need("crc32c")
    return _body(
        opts, crc32c.crc32c, f"{H.versions(['crc32c'])}, hardware_based={crc32c.hardware_based}"
    )


def crc_google(opts):
    google_crc32c = H.need("google_crc32c")
    return _body(
        opts,
        google_crc32c.value,
        f"{H.versions(['google-crc32c'])}, implementation={google_crc32c.implementation}",
    )


def cases():
    """tfrec_fast's default, each of its backends this CPU runs, the two packages."""
    tfr, _ = C.probe_tfrec_fast()
    backends = tfr._core.crc32c_backends() if tfr is not None else []
    return [
        H.Case("tfrec_fast", "tfrec_fast.crc32c", crc_tfrec_fast),
        *(
            H.Case(f"backend_{b}", f"tfrec_fast._core.crc32c_with('{b}')", crc_backend)
            for b in backends
        ),
        H.Case("crc32c", "`crc32c` package", crc_package),
        H.Case("google_crc32c", "google_crc32c.value", crc_google),
    ]


def agrees(r, results):
    sums = {x.extra["checksum"][0] for x in results if x.ok}
    return "ok" if len(sums) == 1 else "MISMATCH"


def columns(size):
    return [
        H.per_second("GB/s", lambda r: size * r.records / 1e9, ".2f"),
        H.Versus("vs crc32c pkg", "crc32c"),
        H.figure("us/call", lambda r: r.median / r.records * 1e6, ".2f"),
        *H.timing(".5f"),
        H.Column("checksum", agrees),
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    H.add_arguments(ap, repeats=9, min_time=0.1)
    ap.add_argument("--sizes", default=",".join(SIZES), help="comma list of: " + ", ".join(SIZES))
    args = ap.parse_args(argv)

    chosen = H.select(cases(), args.cases)
    md, raw = [H.method(args) + "\n"], {}
    for name in [s.strip() for s in args.sizes.split(",") if s.strip()]:
        print(f"== {name}", file=sys.stderr)
        res = H.measure(
            chosen,
            {"size": SIZES[name]},
            log_dir=C.log_dir(f"crc-{SIZES[name]}"),
            **H.timing_options(args),
        )
        md.append(H.section(f"CRC32C of a {name} buffer", *H.table(res, columns(SIZES[name]))))
        raw[name] = H.raw(res)
    return H.emit(md, raw, args.markdown, args.json)


if __name__ == "__main__":
    sys.exit(main())
