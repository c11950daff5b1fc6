"""Drive _worker.py processes: one process per case, kept alive across repeats, measured round-robin
(the start rotates every round) so that the noise of a shared machine falls on every case alike.
"""

from __future__ import annotations

import json
import math
import queue
import statistics
import subprocess
import sys
import threading
from pathlib import Path

import _common as C
from _cases import CASES


class Result:
    def __init__(self, case: str):
        self.case = case
        self.label = CASES[case][0]
        self.info = ""
        self.times: list[float] = []
        self.records: int | None = None
        self.loops = 1  # runs averaged per measured sample
        self.skip: str | None = None  # could not run (reason)
        self.error: str | None = None  # ran but failed or produced wrong output

    @property
    def ok(self) -> bool:
        return self.skip is None and self.error is None and bool(self.times)

    @property
    def median(self) -> float | None:
        return statistics.median(self.times) if self.times else None


class Worker:
    def __init__(self, case: str, file: Path, *, out: Path | None = None, batch_records=None, rss=False,
                 workers=None, n_access=None, python: str = sys.executable):
        C.ensure_dirs()
        self.case, self.result = case, Result(case)
        self.log_path = C.OUT_DIR / "logs" / f"{case}-{Path(file).stem}{'-rss' if rss else ''}.log"
        cmd = [python, str(C.BENCH_DIR / "_worker.py"), case, "--file", str(file)]
        if out is not None:
            cmd += ["--out", str(out)]
        if batch_records:
            cmd += ["--batch-records", str(batch_records)]
        if workers is not None:
            cmd += ["--workers", str(workers)]
        if n_access:
            cmd += ["--n-access", str(n_access)]
        if rss:
            cmd += ["--rss"]
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                     text=True, bufsize=1, env=C.env_for_workers(), cwd=str(C.BENCH_DIR))
        self._q: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            if line.startswith("@@ "):
                self._q.put(json.loads(line[3:]))
        self._q.put(None)

    def recv(self, timeout: float) -> dict:
        try:
            msg = self._q.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise RuntimeError(f"timed out after {timeout:.0f} s (log: {self.log_path})") from None
        if msg is None:
            raise RuntimeError(f"worker died (exit {self.proc.wait()}); {self.log_tail()}")
        return msg

    def send(self, cmd: str) -> None:
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def log_tail(self, n: int = 3) -> str:
        self._log.flush()
        lines = [x for x in Path(self.log_path).read_text(errors="replace").splitlines() if x.strip()]
        return " | ".join(lines[-n:]) + f" (log: {self.log_path})"

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self):
        if self.proc.poll() is None:
            try:
                self.send("quit")
                self.proc.wait(timeout=30)
            except Exception:
                self.kill()
        self._log.close()


def _fail(w: Worker, msg: str) -> None:
    w.result.error = msg
    w.kill()


def measure(specs: list[dict], *, repeats: int, warmup: int, timeout: float = 1800.0, min_time: float = 0.0,
            verbose: bool = True) -> list[Result]:
    """specs: dicts of Worker kwargs (case, file, out, batch_records). All workers start together (setup
    is untimed), then warm-up and measured rounds go round-robin, one worker busy at a time. A measured
    sample of a case faster than `min_time` loops it K times (K fixed from the last warm-up run) and
    records the mean, so that short cases are not at the mercy of a single scheduling blip."""
    loops: dict[str, int] = {}
    workers = [Worker(**s) for s in specs]
    live = []
    for w in workers:
        try:
            msg = w.recv(timeout)
        except RuntimeError as e:
            w.result.skip = f"setup crashed: {e}"
            continue
        if "skip" in msg:
            w.result.skip = msg["skip"]
            w.close()
        else:
            w.result.info = msg.get("info", "")
            live.append(w)
    if verbose:
        for w in workers:
            if w.result.skip:
                print(f"  skip {w.case}: {w.result.skip}", file=sys.stderr)

    def one_round(r: int, keep: bool):
        k = r % len(live) if live else 0
        for w in live[k:] + live[:k]:
            if w.result.error:
                continue
            try:
                w.send(f"run {loops.get(w.case, 1) if keep else 1}")
                msg = w.recv(timeout)
            except RuntimeError as e:
                _fail(w, str(e))
                continue
            if "error" in msg:
                _fail(w, msg["error"])
                continue
            if w.result.records is not None and msg["records"] != w.result.records:
                _fail(w, f"record count changed between runs ({w.result.records} -> {msg['records']})")
                continue
            w.result.records = msg["records"]
            if not keep and min_time > 0:
                loops[w.case] = max(1, math.ceil(min_time / max(msg["seconds"], 1e-6)))
            w.result.loops = loops.get(w.case, 1)
            if keep:
                w.result.times.append(msg["seconds"])
            if verbose:
                print(f"  {'run ' if keep else 'warm'} {r}: {w.case:<20} {msg['seconds']:8.3f} s"
                      f"{' x' + str(msg.get('loops', 1)) if msg.get('loops', 1) > 1 else ''}", file=sys.stderr)

    for r in range(warmup):
        one_round(r, keep=False)
    for w in live:  # output checks (write cases) after the warm-up
        if w.result.error:
            continue
        try:
            w.send("check")
            err = w.recv(timeout).get("error")
        except RuntimeError as e:
            err = str(e)
        if err:
            _fail(w, err)
    for r in range(repeats):
        one_round(r, keep=True)
    for w in workers:
        w.close()
    return [w.result for w in workers]


def measure_rss(case: str, file: Path, timeout: float = 1800.0, **kw) -> dict:
    """Run a case once in a fresh process; peak RSS (ru_maxrss) minus the RSS right after its imports."""
    w = Worker(case, file, rss=True, **kw)
    try:
        msg = w.recv(timeout)
    except RuntimeError as e:
        msg = {"error": str(e)}
    w.close()
    return msg
