#!/usr/bin/env python3
"""One benchmark case in its own process, driven over stdin/stdout by _runner.py.

Protocol (protocol lines on stdout start with '@@ '; anything else printed is ignored):
  worker -> '@@ {"ready": true, "info": ...}'  or  '@@ {"skip": "reason"}' (then exits)
  runner -> 'run [K]'  worker -> '@@ {"seconds": s, "records": n}'   (K times prepare() untimed + run() timed;
                                                                      s = mean time of one run())
  runner -> 'check'    worker -> '@@ {"error": null | "message"}'
  runner -> 'quit'
With --rss the worker instead runs once and reports {"rss_base_kib", "maxrss_kib", "maxrss_base_kib"}:
the baseline is taken right after the case's imports/setup.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import traceback

import _common as C
from _cases import CASES, Skip


def say(obj) -> None:
    sys.__stdout__.write("@@ " + json.dumps(obj) + "\n")
    sys.__stdout__.flush()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--file", required=True, help="input TFRecord file")
    ap.add_argument("--out", help="output file for write cases")
    ap.add_argument("--batch-records", type=int, default=None, help="max_records for iter_batches")
    ap.add_argument("--workers", type=int, default=None, help="DataLoader worker processes (torch cases)")
    ap.add_argument("--n-access", type=int, default=None, help="random accesses per run (random-access cases)")
    ap.add_argument("--rss", action="store_true", help="run once and report peak RSS over the baseline")
    opts = ap.parse_args(argv)
    sys.stdout = sys.stderr  # keep library chatter off the protocol channel

    try:
        case = CASES[opts.case][1](opts)
    except Skip as e:
        say({"skip": str(e)})
        return 0
    except Exception as e:
        traceback.print_exc()
        say({"skip": f"setup failed: {type(e).__name__}: {e}"})
        return 0

    if opts.rss:
        base = C.rss_kib()
        base_max = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        case.prepare()
        n = case.run()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        say({"records": n, "rss_base_kib": base, "maxrss_base_kib": base_max, "maxrss_kib": peak, "info": case.info})
        return 0

    say({"ready": True, "info": case.info})
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "run" or cmd.startswith("run "):
            try:
                loops = int(cmd.split()[1]) if " " in cmd else 1
                total = 0.0
                for _ in range(loops):
                    case.prepare()
                    t0 = time.perf_counter()
                    n = case.run()
                    total += time.perf_counter() - t0
                say({"seconds": total / loops, "records": int(n), "loops": loops})
            except Exception as e:
                traceback.print_exc()
                say({"error": f"{type(e).__name__}: {e}"})
        elif cmd == "check":
            try:
                say({"error": case.check()})
            except Exception as e:
                traceback.print_exc()
                say({"error": f"{type(e).__name__}: {e}"})
        elif cmd == "quit":
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
