"""The benchmark harness: every script in bench/ measures with it (it is not part of the package).

Method: every case runs in a process of its own, so a peer (TensorFlow, the ``tfrecord``
package) is never imported next to tfrec_fast and no import is timed. The processes stay alive
across runs and are driven round-robin, the start rotating every round, one busy at a time, so
that a shared machine's noise falls on every case alike. Tables show the median of the measured
runs after a warm-up, IQR/median as the noise, and ratios between rows of the same run.

A case is a name, a row label and a setup function, ``setup(opts) -> Body``: setup imports and
prepares, untimed (raising Skip when a peer is missing); ``Body.run`` is the timed part.

Only the standard library is imported at module level: worker processes load this file by its
path (a TensorFlow worker must not import tfrec_fast), and bench/_common.py loads it the same way.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import itertools
import json
import math
import os
import platform
import queue
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Optional, Sequence, TextIO, Tuple, cast

# ---- cases -------------------------------------------------------------------------------------


class Skip(Exception):
    """The case cannot run here (a peer is not installed, an input is missing); says why."""


def _is_skip(error: BaseException) -> bool:
    """A Skip of this file, which worker processes and bench/ load by its path as
    tfrec_fast_bench."""
    return type(error).__name__ == "Skip" and type(error).__module__ == "tfrec_fast_bench"


def need(module: str):
    """``module``, imported; Skip saying it is not installed (or not importable) otherwise."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        top = module.split(".")[0]
        if isinstance(error, ModuleNotFoundError) and error.name == top:
            raise Skip(f"{top} not installed") from None
        raise Skip(f"{module} not importable ({type(error).__name__}: {error})") from None


def _nothing() -> None:
    return None


@dataclass
class Body:
    """What a case's setup returns. ``run()`` is timed and returns how many records it handled;
    ``prepare()`` runs untimed before every run; ``check()`` runs once after the warm-up and
    returns an error message or None; ``extras()`` adds figures of a run to the result (for
    example the seconds it spent in fsync)."""

    run: Callable[[], int]
    prepare: Callable[[], None] = _nothing
    check: Callable[[], Optional[str]] = _nothing
    info: str = ""
    extras: Callable[[], Dict[str, Any]] = dict


@dataclass(frozen=True)
class Case:
    """A table row: ``name`` (for --cases and ratios), ``label`` (what the table shows) and
    ``setup``, a module-level function that worker processes find by its file and name."""

    name: str
    label: str
    setup: Callable[[SimpleNamespace], Body]


def select(cases: Sequence[Case], names: Optional[str]) -> List[Case]:
    """The cases named in a comma list (all when ``names`` is empty), in their order."""
    want = set(names.split(",")) if names else None
    return [c for c in cases if want is None or c.name in want]


# ---- the worker process --------------------------------------------------------------------------
# Protocol: lines on stdout that start with '@@ ' are JSON messages (anything else is ignored).
#   worker -> {"ready": true, "info": ...} or {"skip": reason} (and exits)
#   "run K"  -> {"seconds", "cpu_s", "records", "loops", **extras}: K x (prepare, timed run), means
#   "check"  -> {"error": null or a message}
#   "quit"
# Mode "rss" runs once and reports peak RSS; mode "call" returns setup(opts) itself as {"result"}.

_BOOT = (
    "import importlib.util as u, sys; s = u.spec_from_file_location('tfrec_fast_bench', sys.argv[1]); "
    "m = u.module_from_spec(s); sys.modules[s.name] = m; s.loader.exec_module(m); "
    "sys.exit(m.worker(sys.argv[2:]))"
)


def _say(message: dict) -> None:
    protocol = cast(TextIO, sys.__stdout__)
    protocol.write("@@ " + json.dumps(message, default=str) + "\n")
    protocol.flush()


def _function(file: str, name: str) -> Callable:
    """Function ``name`` of this module, or of a script loaded as a module (its folder on sys.path)."""
    if os.path.realpath(file) == os.path.realpath(__file__):
        return globals()[name]
    sys.path.insert(0, os.path.dirname(os.path.realpath(file)))
    module_name = Path(file).stem
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, file)
        if spec is None or spec.loader is None:
            raise ImportError(f"{file}: not a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return getattr(module, name)


def _guarded(step: Callable[[], dict]) -> dict:
    try:
        return step()
    except Exception as error:
        if _is_skip(error):
            raise
        traceback.print_exc()
        return {"error": f"{type(error).__name__}: {error}"}


def _timed(body: Body, loops: int) -> dict:
    seconds = cpu = 0.0
    records = 0
    for _ in range(loops):
        body.prepare()
        cpu_start, start = time.process_time(), time.perf_counter()
        records = body.run()
        seconds += time.perf_counter() - start
        cpu += time.process_time() - cpu_start
    return {
        "seconds": seconds / loops,
        "cpu_s": cpu / loops,
        "records": int(records),
        "loops": loops,
        **body.extras(),
    }


def rss_kib() -> int:
    """This process's resident set size (VmRSS) in KiB; -1 where /proc does not say."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return -1


def _reset_peak_rss() -> bool:
    """Linux: start the peak (VmHWM) afresh from the current RSS, so the setup's own peak does not
    hide the run's (``echo 5 > /proc/self/clear_refs``)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_kib() -> int:
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return -1


def _peak_rss(body: Body) -> dict:
    import resource  # Unix only

    base, base_max = rss_kib(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if _reset_peak_rss():
        base_max = base
    body.prepare()
    records = body.run()
    peak = _peak_kib() if base_max == base else -1
    if peak < 0:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "records": records,
        "rss_base_kib": base,
        "maxrss_base_kib": base_max,
        "maxrss_kib": peak,
    }


def worker(argv: List[str]) -> int:
    """A case in this process, driven over stdin/stdout by _Worker: argv = mode, file, function, opts."""
    mode, file, name, opts = argv[0], argv[1], argv[2], SimpleNamespace(**json.loads(argv[3]))
    sys.stdout = sys.stderr  # library chatter off the protocol channel
    try:
        if mode == "call":
            _say(_guarded(lambda: {"result": _function(file, name)(opts)}))
            return 0
        body = _function(file, name)(opts)
    except Exception as error:
        if _is_skip(error):
            _say({"skip": str(error)})
            return 0
        traceback.print_exc()
        _say({"error": f"setup failed: {type(error).__name__}: {error}"})
        return 0
    if mode == "rss":
        _say({"info": body.info, **_guarded(lambda: _peak_rss(body))})
        return 0
    _say({"ready": True, "info": body.info})
    for line in sys.stdin:
        command = line.split()
        if command[:1] == ["run"]:
            _say(_guarded(lambda: _timed(body, int(command[1]))))  # noqa: B023 (called now)
        elif command == ["check"]:
            _say(_guarded(lambda: {"error": body.check()}))
        elif command == ["quit"]:
            break
    return 0


# ---- the runner ----------------------------------------------------------------------------------


@dataclass
class Result:
    """One case's measurements: seconds per run, plus any per-run ``extra`` figures (``cpu_s``:
    the case process's CPU time, all its threads). ok: it ran, passed its check, has times."""

    name: str
    label: str
    opts: Dict[str, Any]
    info: str = ""
    times: List[float] = field(default_factory=list)
    records: Optional[int] = None
    loops: int = 1  # runs averaged per measured sample
    extra: Dict[str, list] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)  # shown under the table
    skip: Optional[str] = None  # could not run (why)
    error: Optional[str] = None  # ran, but failed or gave wrong output

    @property
    def ok(self) -> bool:
        return self.skip is None and self.error is None and bool(self.times)

    @property
    def median(self) -> float:
        """Of the measured runs (an ok result has some)."""
        return statistics.median(self.times)


def _worker_env() -> dict:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's banner out of the logs
    env.setdefault("PYTHONHASHSEED", "0")
    return env


class _Worker:
    """A case's process. Its stderr goes to ``log_dir/<case>.log`` (a temporary file without one)."""

    def __init__(self, case: Case, opts: dict, mode: str, log_dir: Optional[Path]):
        self.result = Result(case.name, case.label, dict(opts))
        if log_dir is not None:
            Path(log_dir).mkdir(parents=True, exist_ok=True)
            self.log_path: Optional[Path] = Path(log_dir) / f"{case.name}.log"
            self.log = open(self.log_path, "w+")
        else:
            self.log_path, self.log = None, tempfile.TemporaryFile("w+")
        args = [
            inspect.getfile(case.setup),
            case.setup.__name__,
            json.dumps({"case": case.name, **opts}, default=str),
        ]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, __file__, mode, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            bufsize=1,
            env=_worker_env(),
        )
        self.stdin, self.stdout = cast(TextIO, self.proc.stdin), cast(TextIO, self.proc.stdout)
        self.messages: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        with self.stdout:
            for line in self.stdout:
                if line.startswith("@@ "):
                    self.messages.put(json.loads(line[3:]))
        self.messages.put(None)

    def log_tail(self, n: int = 3) -> str:
        self.log.flush()
        self.log.seek(0)
        lines = [x for x in self.log.read().splitlines() if x.strip()]
        return " | ".join(lines[-n:]) + (f" (log: {self.log_path})" if self.log_path else "")

    def receive(self, timeout: float) -> dict:
        try:
            message = self.messages.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise RuntimeError(f"timed out after {timeout:.0f} s; {self.log_tail()}") from None
        if message is None:
            raise RuntimeError(f"worker died (exit {self.proc.wait()}); {self.log_tail()}")
        return message

    def ask(self, command: str, timeout: float) -> dict:
        try:
            self.stdin.write(command + "\n")
            self.stdin.flush()
        except OSError:
            pass  # it died: receive() says how
        return self.receive(timeout)

    def start(self, timeout: float) -> bool:
        """Waits for the setup; False (and the reason on the result) when the case cannot run:
        a skip (a peer or an input missing here) or an error (the setup failed or crashed)."""
        try:
            message = self.receive(timeout)
        except RuntimeError as error:
            message = {"error": f"setup crashed: {error}"}
        self.result.info = message.get("info", "")
        if "skip" in message or "error" in message:
            self.result.skip, self.result.error = message.get("skip"), message.get("error")
            self.close()
            return False
        return True

    def fail(self, error: str) -> None:
        self.result.error = error
        self.kill()

    def step(self, loops: int, keep: bool, timeout: float) -> Optional[float]:
        """One sample (``loops`` runs); recorded when ``keep``. Its seconds, or None on failure."""
        r = self.result
        try:
            message = self.ask(f"run {loops}", timeout)
        except RuntimeError as error:
            message = {"error": str(error)}
        if "error" in message:
            self.fail(message["error"])
            return None
        if r.records is not None and message["records"] != r.records:
            self.fail(f"record count changed between runs ({r.records} -> {message['records']})")
            return None
        r.records = message.pop("records")
        seconds = message.pop("seconds")
        if keep:
            r.times.append(seconds)
            r.loops = message.pop("loops")
            for key, value in message.items():
                r.extra.setdefault(key, []).append(value)
        return seconds

    def check(self, timeout: float) -> None:
        try:
            error = self.ask("check", timeout).get("error")
        except RuntimeError as e:
            error = str(e)
        if error:
            self.fail(error)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.stdin.write("quit\n")
                self.stdin.flush()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        with contextlib.suppress(OSError):
            self.stdin.close()
        self.log.close()


def measure(
    cases: Sequence[Case],
    opts: dict,
    *,
    repeats: int,
    warmup: int = 1,
    min_time: float = 0.0,
    timeout: float = 1800.0,
    verbose: bool = True,
    log_dir: Optional[Path] = None,
    processes: int = 1,
) -> List[Result]:
    """Every case with ``opts`` (its setup sees them as attributes, plus ``case``, its name).
    All processes start together (setup is untimed); warm-up rounds, then each case's check, then
    the measured rounds go round-robin. A case faster than ``min_time`` is looped K times per
    sample (K from its last warm-up run) and the sample is the mean: one scheduling blip then
    cannot decide a short case's number.

    ``processes`` > 1 measures it all that many times over, each time in new processes, and pools
    each case's samples (``extra["process"]`` says which pass took each). On a virtual machine the
    same loop can run up to 2x slower in one process than in the next, for the whole life of the
    process; pooled, one process's luck no longer decides a row or a ratio between rows."""
    if processes < 1:
        raise ValueError("processes must be at least 1")
    passes = []
    for p in range(processes):
        where = log_dir if processes == 1 or log_dir is None else Path(log_dir) / f"process{p}"
        if verbose and processes > 1:
            print(f"  process pass {p + 1} of {processes}", file=sys.stderr)
        passes.append(
            _measure_once(
                cases,
                opts,
                repeats=repeats,
                warmup=warmup,
                min_time=min_time,
                timeout=timeout,
                verbose=verbose,
                log_dir=where,
            )
        )
    if processes == 1:
        return passes[0]
    return [_pooled(list(same_case)) for same_case in zip(*passes)]


def _pooled(results: List[Result]) -> Result:
    """One case's results from several passes as one: all samples, or the first skip or error."""
    pooled = Result(results[0].name, results[0].label, results[0].opts, info=results[0].info)
    for p, r in enumerate(results):
        pooled.notes += [n for n in r.notes if n not in pooled.notes]
        if r.skip or r.error:
            pooled.skip, pooled.error = r.skip, r.error
            pooled.times, pooled.extra = [], {}
            return pooled
        if pooled.records is not None and r.records != pooled.records:
            pooled.error = (
                f"record count differs between processes ({pooled.records} -> {r.records})"
            )
            pooled.times, pooled.extra = [], {}
            return pooled
        pooled.records = r.records
        pooled.loops = max(pooled.loops, r.loops)  # runs/sample: K may differ between passes
        pooled.times += r.times
        for key, values in r.extra.items():
            pooled.extra.setdefault(key, []).extend(values)
        pooled.extra.setdefault("process", []).extend([p] * len(r.times))
    return pooled


def _measure_once(
    cases: Sequence[Case],
    opts: dict,
    *,
    repeats: int,
    warmup: int,
    min_time: float,
    timeout: float,
    verbose: bool,
    log_dir: Optional[Path],
) -> List[Result]:
    workers = [_Worker(c, opts, "loop", log_dir) for c in cases]
    live = [w for w in workers if w.start(timeout)]
    for w in workers:
        if verbose and (w.result.skip or w.result.error):
            what = (
                f"skip {w.result.name}: {w.result.skip}"
                if w.result.skip
                else f"FAILED {w.result.name}: {w.result.error}"
            )
            print(f"  {what}", file=sys.stderr)
    loops: Dict[str, int] = {}

    def one_round(r: int, keep: bool) -> None:
        k = r % len(live) if live else 0
        for w in live[k:] + live[:k]:
            name = w.result.name
            if w.result.error:
                continue
            seconds = w.step(loops.get(name, 1) if keep else 1, keep, timeout)
            if seconds is None:
                continue
            if not keep and min_time > 0:
                loops[name] = max(1, math.ceil(min_time / max(seconds, 1e-6)))
            if verbose:
                k_text = f" x{loops[name]}" if keep and loops.get(name, 1) > 1 else ""
                print(
                    f"  {'run ' if keep else 'warm'} {r}: {name:<24} {seconds:8.4f} s{k_text}",
                    file=sys.stderr,
                )

    for r in range(warmup):
        one_round(r, keep=False)
    for w in live:
        if not w.result.error:
            w.check(timeout)
    for r in range(repeats):
        one_round(r, keep=True)
    for w in workers:
        w.close()
    return [w.result for w in workers]


def measure_rss(
    cases: Sequence[Case], opts: dict, *, timeout: float = 1800.0, log_dir: Optional[Path] = None
) -> List[Result]:
    """Each case run once in a fresh process, one after another. ``extra``: ``rss_base_kib``
    (VmRSS right after the setup), ``maxrss_base_kib`` (the peak by then) and ``maxrss_kib``."""
    results = []
    for case in cases:
        w = _Worker(case, opts, "rss", log_dir)
        try:
            message = w.receive(timeout)
        except RuntimeError as error:
            message = {"error": str(error)}
        r = w.result
        r.info, r.skip, r.error = (
            message.pop("info", ""),
            message.pop("skip", None),
            message.pop("error", None),
        )
        if not (r.skip or r.error):
            r.records = message.pop("records")
            r.extra = {k: [v] for k, v in message.items()}
            r.times = [0.0]  # ran once; RSS, not time, is its figure
        w.close()
        results.append(r)
    return results


def call(
    function: Callable[[SimpleNamespace], Any],
    opts: dict,
    *,
    timeout: float = 1800.0,
    log_dir: Optional[Path] = None,
) -> Any:
    """``function(opts)`` run in a fresh process (importing what it likes); its JSON-able result.
    Skip when it raises Skip; RuntimeError with the process's last words when it fails."""
    w = _Worker(Case(function.__name__, function.__name__, function), opts, "call", log_dir)
    try:
        message = w.receive(timeout)
        if "skip" in message:
            raise Skip(message["skip"])
        if "error" in message:
            raise RuntimeError(f"{message['error']}; {w.log_tail()}")
        return message["result"]
    finally:
        w.close()


def expect_records(results: Sequence[Result], n: int, exempt: Sequence[str] = ()) -> None:
    """Marks as failed every row (but the exempt ones) that did not handle exactly n records."""
    for r in results:
        if r.ok and r.name not in exempt and r.records != n:
            r.error = f"handled {r.records} records, expected {n}"


# ---- numbers and tables ----------------------------------------------------------------------------


def spread(times: Sequence[float]) -> float:
    """Interquartile range / median: the noise shown next to each median (NaN under 2 runs)."""
    m = statistics.median(times) if times else 0.0
    if len(times) < 2 or not m:
        return float("nan")
    q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return (q3 - q1) / m


def fastest(results: Sequence[Result], names: Sequence[str]) -> Optional[Result]:
    """The ok result with the smallest median among those named, or None."""
    return min(
        (r for r in results if r.ok and r.name in names), key=lambda r: r.median, default=None
    )


def fmt_rate(x: Optional[float]) -> str:
    """1.23 G, 4.56 M, 7.89 k, 12."""
    if x is None or x != x:
        return "—"
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= div:
            return f"{x / div:.2f} {unit}"
    return f"{x:.0f}"


def fmt_num(x: Optional[float], spec: str = ".2f", suffix: str = "") -> str:
    if x is None or x != x:  # None or NaN
        return "—"
    return f"{x:{spec}}{suffix}"


def md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max([len(str(h)), *(len(str(r[i])) for r in rows)]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"

    return "\n".join(
        [line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)]
    )


class Column:
    """A table column: its header and the cell of an ok row (given all rows, for ratios)."""

    def __init__(self, header: str, cell: Callable[[Result, Sequence[Result]], str]):
        self.header, self._cell = header, cell

    def cell(self, r: Result, results: Sequence[Result]) -> str:
        return self._cell(r, results)


def figure(
    header: str, value: Callable[[Result], Optional[float]], spec: str = ".2f", suffix: str = ""
) -> Column:
    return Column(header, lambda r, _: fmt_num(value(r), spec, suffix))


def per_second(header: str, amount: Any, spec: Optional[str] = None) -> Column:
    """``amount`` (a number, or a function of the row; None gives '—') per second of the row's
    median; ``spec`` None writes 1.23 M."""

    def cell(r: Result, _: Sequence[Result]) -> str:
        a = amount(r) if callable(amount) else amount
        x = None if a is None else a / r.median
        return fmt_rate(x) if spec is None else fmt_num(x, spec)

    return Column(header, cell)


class Versus(Column):
    """How many times faster a row is than the fastest of ``peers`` (their median over its own).
    Rows for which ``mine(row)`` holds are held to ``target``: ✅ or ❌ in the cell, a line in
    targets(). ``within=W`` instead holds them to taking at most W times the peer's time (a
    ratio of at least 1/W), for a row that does more than its peer and may cost that little."""

    def __init__(
        self,
        header: str,
        *peers: str,
        target: Optional[float] = None,
        within: Optional[float] = None,
        mine: Callable[[Result], bool] = lambda r: False,
        suffix: str = "x",
    ):
        if within is not None:
            target = 1 / within
        self.header, self.peers, self.target, self.mine, self.suffix = (
            header,
            peers,
            target,
            mine,
            suffix,
        )
        self.within = within
        self.peer = header[3:] if header.startswith("vs ") else header

    def goal(self, x: float, cell: bool = False) -> str:
        """The target in words: 'target ≥20x' in a cell, 'target 20x' in a targets() line; with
        ``within``, the row's time over the peer's and the limit: 'time 1.13x, target ≤1.2x'."""
        if self.within is not None:
            return f"time {1 / x:.2f}x, target ≤{self.within:g}x"
        return f"target {'≥' if cell else ''}{self.target:g}x"

    def ratio(self, r: Result, results: Sequence[Result]) -> Optional[float]:
        peer = fastest(results, self.peers)
        return None if peer is None or not r.ok else peer.median / r.median

    def cell(self, r: Result, results: Sequence[Result]) -> str:
        x = self.ratio(r, results)
        if x is None:
            return "—"
        target = self.target
        if target is None or not self.mine(r):
            return f"{x:.2f}{self.suffix}"
        return f"{x:.2f}{self.suffix} {'✅' if x >= target else '❌'} ({self.goal(x, cell=True)})"


def timing(spec: str = ".4f") -> List[Column]:
    """The columns every table ends with: median seconds, IQR/median, runs per sample."""
    return [
        figure("median s", lambda r: r.median, spec),
        figure("IQR/median", lambda r: 100 * spread(r.times), ".0f", "%"),
        Column("runs/sample", lambda r, _: str(r.loops)),
    ]


def notes(results: Sequence[Result]) -> List[str]:
    """Why rows are missing (skipped: could not run here; FAILED: an error or wrong output), then
    what each row measured."""
    missing = [
        f"{r.label}: {'skipped' if r.skip else 'FAILED'} -- {r.skip or r.error or 'no runs'}"
        for r in results
        if not r.ok
    ]
    said = [
        f"{r.label}: {'; '.join(x for x in (r.info, *r.notes) if x)}"
        for r in results
        if r.ok and (r.info or r.notes)
    ]
    return missing + said


def table(
    results: Sequence[Result], columns: Sequence[Column], first: str = "implementation"
) -> Tuple[str, List[str]]:
    """(Markdown table of the ok rows, notes)."""
    rows = [[r.label, *(c.cell(r, results) for c in columns)] for r in results if r.ok]
    return md_table([first, *(c.header for c in columns)], rows), notes(results)


def targets(results: Sequence[Result], columns: Sequence[Column], what: str) -> List[str]:
    """A line per row held to a target: '<what>, <row>: 12.3x <peer> (target 20x: met)'."""
    lines = []
    for c in columns:
        if not isinstance(c, Versus) or c.target is None:
            continue
        for r in results:
            x = c.ratio(r, results) if c.mine(r) else None
            if x is not None:
                lines.append(
                    f"{what}, {r.label}: {x:.{1 if c.within is None else 2}f}x {c.peer} ({c.goal(x)}: "
                    f"{'met' if x >= c.target else 'MISSED'})"
                )
    return lines


def section(title: str, text: str, lines: Sequence[str] = ()) -> str:
    """'### title', the table, and the notes as a list."""
    out = [f"### {title}", "", text]
    if lines:
        out += [""] + [f"- {x}" for x in lines]
    return "\n".join(out) + "\n"


def raw(results: Sequence[Result]) -> dict:
    return {r.name: asdict(r) for r in results}


# ---- scripts: options, header, output ----------------------------------------------------------------


def add_arguments(parser, *, repeats: int = 5, min_time: float = 0.5) -> None:
    """The options every bench script takes."""
    parser.add_argument(
        "--repeats", type=int, default=repeats, help="measured runs per case (the median is shown)"
    )
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured runs per case first")
    parser.add_argument(
        "--min-time",
        type=float,
        default=min_time,
        help="a sample loops a fast case until it takes about this long (0: one run per sample)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="measure everything this many times, each time in new processes, and pool the samples",
    )
    parser.add_argument("--cases", help="comma list of case names to run (default: all)")
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds allowed per single run"
    )
    parser.add_argument("--markdown", help="also write the tables to this Markdown file")
    parser.add_argument("--json", help="also write the raw timings to this JSON file")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")


def timing_options(args) -> dict:
    """measure()'s keyword arguments from add_arguments()' options."""
    return dict(
        repeats=args.repeats,
        warmup=args.warmup,
        min_time=args.min_time,
        timeout=args.timeout,
        verbose=not args.quiet,
        processes=args.processes,
    )


def method(args) -> str:
    """The sentence that says how the tables were measured."""
    looping = (
        f"; a sample averages K back-to-back runs of a case faster than {args.min_time} s (K: 'runs/sample')"
        if args.min_time
        else ""
    )
    pooled = (
        f" The whole measurement made {args.processes} times, each time in new processes, the samples pooled "
        f"(median of {args.processes * args.repeats})."
        if args.processes > 1
        else ""
    )
    return (
        f"Median of {args.repeats} runs after {args.warmup} warm-up, cases interleaved round-robin, each in "
        f"its own process{looping}.{pooled} Ratios: how many times faster than that row's peer (>1 = faster), "
        "measured in the same run."
    )


def emit(
    md: Sequence[str],
    raw_data: dict,
    markdown: Optional[str],
    json_path: Optional[str],
    summary: Sequence[str] = (),
) -> int:
    """Prints the Markdown sections (and a Targets list when there is a summary), writes them and
    the raw timings to the files asked for; the exit status of a bench script: 1 when a row
    failed (an error, a crash, wrong output or a failed setup; a skip is not a failure).

    The Markdown starts with where it comes from (:func:`provenance`), so that a table copied
    elsewhere keeps its command and commit."""
    failed = failures(raw_data)
    md = [provenance() + "\n", *md]
    if summary:
        md.append("### Targets\n\n" + "\n".join(f"- {s}" for s in summary) + "\n")
    if failed:
        md.append("### Failed rows\n\n" + "\n".join(f"- {f}" for f in failed) + "\n")
    text = "\n".join(md)
    print(text)
    if markdown:
        Path(markdown).write_text(text)
    if json_path:
        Path(json_path).write_text(json.dumps(raw_data, indent=1, default=str))
    for f in failed:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if failed else 0


def failures(raw_data: Any) -> List[str]:
    """'label: error' for every failed row in raw timings (raw() of results, nested in dicts
    and lists as the scripts keep them)."""
    if isinstance(raw_data, dict):
        if {"name", "label", "skip", "error", "times"} <= raw_data.keys():
            return [f"{raw_data['label']}: {raw_data['error']}"] if raw_data["error"] else []
        values: Sequence[Any] = list(raw_data.values())
    elif isinstance(raw_data, (list, tuple)):
        values = raw_data
    else:
        return []
    return [f for v in values for f in failures(v)]


def _git(args: Sequence[str], cwd: Path) -> Optional[str]:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def provenance(argv: Optional[Sequence[str]] = None) -> str:
    """One Markdown line: the command that made this output (the environment variables that
    change a measurement, the interpreter, the script and its arguments), the commit of the
    checkout the script is in, '+ uncommitted changes' when that checkout differs from it, the
    tfrec_fast the cases import, and the date."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]).resolve() if argv and argv[0] not in ("", "-c") else Path.cwd()
    folder = script if script.is_dir() else script.parent
    root = _git(["rev-parse", "--show-toplevel"], folder)
    shown = argv[:1]
    if root and argv and script.is_file():
        shown = [os.path.relpath(script, root)]
    env = [
        f"{k}={shlex.quote(os.environ[k])}"
        for k in ("PYTHONPATH", "OPENBLAS_NUM_THREADS", "TFREC_FAST_CRC32C")
        if k in os.environ
    ]
    command = " ".join([*env, shlex.quote(sys.executable), *map(shlex.quote, [*shown, *argv[1:]])])
    where = "not in a git checkout"
    if root:
        commit = _git(["rev-parse", "--short=12", "HEAD"], Path(root)) or "?"
        dirty = _git(["status", "--porcelain", "--untracked-files=no"], Path(root))
        where = f"from `{root}` at commit {commit}" + (
            " **+ uncommitted changes**" if dirty else ""
        )
    spec = importlib.util.find_spec("tfrec_fast")
    tfr = os.path.dirname(spec.origin) if spec and spec.origin else "not importable"
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return f"_Made by `{command}` {where}; tfrec_fast from `{tfr}`; {date}._"


def _lscpu() -> Dict[str, str]:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return {}
    return {
        k.strip(): v.strip()
        for k, v in (line.split(":", 1) for line in out.splitlines() if ":" in line)
    }


def machine() -> List[str]:
    """The machine, as Markdown list items: CPU, memory, system, Python, load."""
    cpu = _lscpu()
    flags = cpu.get("Flags", "").split()
    try:
        memory = f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB"
    except (ValueError, OSError, AttributeError):
        memory = "?"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return [
        f"CPU: {cpu.get('Model name', platform.processor() or '?')}; {os.cpu_count()} logical CPUs "
        f"(threads/core {cpu.get('Thread(s) per core', '?')}, sse4_2={'yes' if 'sse4_2' in flags else 'no'}, "
        f"pclmulqdq={'yes' if 'pclmulqdq' in flags else 'no'}, hypervisor {cpu.get('Hypervisor vendor', 'none')})",
        f"Memory: {memory}; kernel {platform.release()}; {platform.platform()}",
        f"Python {platform.python_version()} ({sys.executable}); load average (1, 5, 15 min) {load}",
    ]


def versions(distributions: Sequence[str]) -> str:
    """'numpy 2.4.6, tensorflow (not installed), ...' from package metadata (nothing imported)."""
    out = []
    for d in distributions:
        try:
            out.append(f"{d} {version(d)}")
        except PackageNotFoundError:
            out.append(f"{d} (not installed)")
    return ", ".join(out)


# ---- reading: rows of bench/bench_read.py ----------------------


def read_options(
    files: Sequence[str],
    compression: Optional[str] = None,
    storage_options: Optional[dict] = None,
    batch_records: Optional[int] = None,
) -> dict:
    return dict(
        files=[os.fspath(f) for f in files],
        compression=compression or None,
        storage_options=storage_options,
        batch_records=batch_records,
    )


def counting(items: Callable[[], Any]) -> Callable[[], int]:
    """A run() that goes through ``items()`` and returns how many there were."""

    def run() -> int:
        n = 0
        for _ in items():
            n += 1
        return n

    return run


def summing(batches: Callable[[], Any]) -> Callable[[], int]:
    """A run() that goes through ``batches()`` and returns the sum of their lengths."""

    def run() -> int:
        n = 0
        for batch in batches():
            n += len(batch)
        return n

    return run


def read_batches(opts) -> Body:
    tfr = need("tfrec_fast")

    def batches():
        for path in opts.files:
            with tfr.TFRecordReader(
                path, opts.compression, storage_options=opts.storage_options
            ) as reader:
                yield from reader.iter_batches(max_records=opts.batch_records)

    return Body(summing(batches), info=f"max_records={opts.batch_records}, both CRCs checked")


def read_each(opts) -> Body:
    tfr = need("tfrec_fast")
    return Body(
        counting(
            lambda: tfr.read_records(
                opts.files, opts.compression, storage_options=opts.storage_options
            )
        ),
        info="one bytes-like per record, both CRCs checked",
    )


def read_tf(opts) -> Body:
    tf = need("tensorflow")
    compression = (opts.compression or "").upper()
    return Body(
        summing(
            lambda: tf.data.TFRecordDataset(opts.files, compression_type=compression).batch(1024)
        ),
        info=f"TF {tf.__version__}, tf.data.TFRecordDataset(files).batch(1024), CRCs checked",
    )


def read_tfrecord(opts) -> Body:
    reader = need("tfrecord.reader")

    def records():
        return itertools.chain.from_iterable(
            reader.tfrecord_iterator(path, compression_type=opts.compression) for path in opts.files
        )

    return Body(
        counting(records),
        info="tfrecord.reader.tfrecord_iterator: raw records, NO CRC check, one reused buffer",
    )


READ_CASES = [
    Case("tfrec_fast_batches", "tfrec_fast batched (TFRecordReader.iter_batches)", read_batches),
    Case("tfrec_fast_records", "tfrec_fast per record (read_records)", read_each),
    Case("tf", "TensorFlow TFRecordDataset.batch(1024)", read_tf),
    Case("tfrecord", "tfrecord tfrecord_iterator", read_tfrecord),
]
