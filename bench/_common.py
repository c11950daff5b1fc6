"""Shared helpers for the benchmark scripts: paths, data sets, a pure-Python TFRecord framer/parser,
timing (median of N after a warm-up), the tfrec_fast availability probe and Markdown tables.

Only the standard library is imported at module level: workers import this module before they take
their RSS baseline, and peers (TensorFlow, `tfrecord`) must not be imported into other processes.
"""

from __future__ import annotations

import json
import os
import statistics
import struct
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
DATA_DIR = BENCH_DIR / "data"  # git-ignored
OUT_DIR = BENCH_DIR / "out"  # git-ignored: scratch output of write benchmarks, logs, partial tables

# name -> how make_data.py builds it. Sizes are defaults; make_data.py can override them (for quick runs).
DATASETS = {
    "large": {
        "file": "large_100k.tfrecord",
        "label": "~400 MB, ~100 KB records",
        "n_records": 4000,
        "min_size": 75_000,
        "max_size": 125_000,  # uniform, mean 100 KB -> ~400 MB
        "seed": 1,
    },
    "small": {
        "file": "small_64b.tfrecord",
        "label": "2M records of 64 B",
        "n_records": 2_000_000,
        "min_size": 64,
        "max_size": 64,
        "seed": 2,
    },
}

MASK_DELTA = 0xA282EAD8


def data_path(name: str) -> Path:
    return DATA_DIR / DATASETS[name]["file"]


def meta_path(name: str) -> Path:
    p = data_path(name)
    return p.with_name(p.name + ".json")


def load_meta(name: str) -> dict | None:
    """The sidecar written by make_data.py, or None when the data file is missing or stale."""
    p, m = data_path(name), meta_path(name)
    if not p.exists() or not m.exists():
        return None
    meta = json.loads(m.read_text())
    if meta.get("file_bytes") != p.stat().st_size:
        return None
    return meta


# ---------------------------------------------------------------------------------------------
# Pure-Python framing (used to make data before tfrec_fast exists, and by workers for setup only)


def masked(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + MASK_DELTA) & 0xFFFFFFFF


def frame_record(data, crc_fn) -> bytes:
    """length u64 LE | masked crc32c(length) u32 LE | data | masked crc32c(data) u32 LE."""
    length = struct.pack("<Q", len(data))
    return b"".join(
        (length, struct.pack("<I", masked(crc_fn(length))), data, struct.pack("<I", masked(crc_fn(data))))
    )


def read_payloads_py(path) -> list[bytes]:
    """Every payload of an uncompressed TFRecord file as bytes (no CRC check; setup only, not timed)."""
    buf = Path(path).read_bytes()
    out, pos, end = [], 0, len(buf)
    unpack = struct.unpack_from
    while pos < end:
        (n,) = unpack("<Q", buf, pos)
        out.append(buf[pos + 12 : pos + 12 + n])
        pos += 16 + n
    if pos != end:
        raise ValueError(f"{path}: trailing garbage or truncated record at {pos}")
    return out


def index_path(path) -> Path:
    """Where the benches keep the index of a data file: FILE.idx next to it (bench/data/, git-ignored)."""
    p = Path(path)
    return p.with_name(p.name + ".idx")


def ensure_index_py(path) -> Path:
    """Writes FILE.idx (one "{offset} {framed size}\\n" line per record: the text format of the
    `tfrecord` package's tfrecord2idx, DALI and tfrec_fast) with a pure-Python header scan, unless an
    index newer than the file and covering exactly its bytes is there. Setup only, never timed."""
    path = Path(path)
    idx = index_path(path)
    size = path.stat().st_size
    if idx.exists() and idx.stat().st_mtime_ns >= path.stat().st_mtime_ns:
        with open(idx, "rb") as f:
            f.seek(max(0, idx.stat().st_size - 64))
            last = f.read().splitlines()[-1:] or [b"0 0"]
        off, n = map(int, last[0].split())
        if off + n == size:
            return idx
    lines, pos = [], 0
    unpack = struct.unpack
    with open(path, "rb") as f:
        while pos < size:
            f.seek(pos)
            (n,) = unpack("<Q", f.read(8))
            lines.append(f"{pos} {n + 16}\n")
            pos += n + 16
    if pos != size:
        raise ValueError(f"{path}: truncated record at the end")
    tmp = idx.with_name(idx.name + ".tmp")
    tmp.write_text("".join(lines))
    os.replace(tmp, idx)
    return idx


# ---------------------------------------------------------------------------------------------
# tfrec_fast availability

TFREC_FAST_NEEDED = (
    "crc32c",
    "masked_crc32c",
    "crc32c_backend",
    "read_records",
    "TFRecordReader",
    "TFRecordWriter",
    "DataLossError",
)


def probe_tfrec_fast():
    """(module, None) when tfrec_fast imports and has the API the benches use, else (None, reason)."""
    try:
        import tfrec_fast  # noqa: PLC0415
    except Exception as e:  # ImportError, or a broken build raising something else
        return None, f"tfrec_fast not importable ({type(e).__name__}: {e})"
    missing = [n for n in TFREC_FAST_NEEDED if not hasattr(tfrec_fast, n)]
    if missing:
        return None, f"tfrec_fast lacks {', '.join(missing)} (see /work/api_spec.md)"
    return tfrec_fast, None


KNOWN_CRC_BACKENDS = ("avx512", "sse42", "arm64", "portable")


def crc_backends(tfr) -> tuple[list[str], str | None]:
    """tfrec_fast._core.crc32c_backends(), or (if that is missing or raises) the known names that
    crc32c_with accepts; the second item is a note about the fallback."""
    core = getattr(tfr, "_core", None)
    if core is None or not hasattr(core, "crc32c_with"):
        return [], "tfrec_fast._core.crc32c_with missing"
    try:
        return list(core.crc32c_backends()), None
    except Exception as e:
        found = []
        for b in KNOWN_CRC_BACKENDS:
            try:
                core.crc32c_with(b, b"123456789")
                found.append(b)
            except Exception:
                pass
        return found, (f"tfrec_fast._core.crc32c_backends() failed ({type(e).__name__}: {str(e).splitlines()[0]}); "
                       f"backends found by trying crc32c_with: {found}")


# ---------------------------------------------------------------------------------------------
# Timing


def median_time(fn, repeats: int = 5, warmup: int = 1) -> tuple[float, list[float]]:
    """Median wall time of fn() over `repeats` runs after `warmup` unmeasured runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def spread(times: list[float]) -> float:
    """Interquartile range / median: the noise indicator shown next to each median (NaN if < 2 runs)."""
    if len(times) < 2:
        return float("nan")
    q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive")
    m = statistics.median(times)
    return (q3 - q1) / m if m else float("nan")


def rss_kib() -> int:
    """Current resident set size (VmRSS) of this process in KiB (Linux)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


# ---------------------------------------------------------------------------------------------
# Formatting


def fmt_rate(x: float | None) -> str:
    if x is None:
        return "—"
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= div:
            return f"{x / div:.2f} {unit}"
    return f"{x:.0f}"


def fmt_num(x: float | None, spec: str = ".2f", suffix: str = "") -> str:
    if x is None or x != x:  # None or NaN
        return "—"
    return f"{x:{spec}}{suffix}"


def md_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])


def ensure_dirs() -> None:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / "logs").mkdir(parents=True, exist_ok=True)


def env_for_workers() -> dict:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's banner out of the logs
    env.setdefault("PYTHONHASHSEED", "0")
    return env


def emit(md: list[str], raw: dict, markdown: str | None, json_path: str | None,
         summary: list[str] | None = None) -> int:
    """Prints the Markdown sections (plus a Targets list when there is a summary) and writes
    them and the raw timings to the files asked for; the exit status of a bench script."""
    if summary:
        md = md + ["### Targets\n\n" + "\n".join(f"- {s}" for s in summary) + "\n"]
    text = "\n".join(md)
    print(text)
    if markdown:
        with open(markdown, "w") as f:
            f.write(text)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(raw, f, indent=1, default=str)
    return 0
