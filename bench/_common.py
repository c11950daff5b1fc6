"""What the bench scripts share: the harness (bench/harness.py, as `harness`), paths, the data
sets of make_data.py, a pure-Python TFRecord framer/parser and index.

Only the standard library is imported at module level: case processes import this module before
they take their RSS baseline, and a peer's process (TensorFlow) must not import tfrec_fast. That is
also why the harness is loaded by its path.
"""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent


def _load_harness():
    """bench/harness.py as module `tfrec_fast_bench` (the name its case processes load it
    under, so that both see one Skip class)."""
    name = "tfrec_fast_bench"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, BENCH_DIR / "harness.py")
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


harness = _load_harness()
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
        (
            length,
            struct.pack("<I", masked(crc_fn(length))),
            data,
            struct.pack("<I", masked(crc_fn(data))),
        )
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


def probe_tfrec_fast():
    """(module, None) when tfrec_fast imports, else (None, reason)."""
    try:
        return harness.need("tfrec_fast"), None
    except harness.Skip as e:
        return None, str(e)


def header(args, text: str) -> str:
    """The first lines of a script's Markdown: how it measured, its own words, and a warning when
    tfrec_fast is not importable."""
    tfr, why = probe_tfrec_fast()
    return f"{harness.method(args)} {text}\n" + (
        "" if tfr else f"**tfrec_fast rows skipped: {why}.**\n"
    )


def add_writer_arguments(ap) -> None:
    """The options of make_data.py and make_example_data.py."""
    ap.add_argument("--writer", choices=["auto", "python", "tfrec_fast"], default="auto")
    ap.add_argument("--force", action="store_true", help="regenerate even if the file exists")


def data_writer(args):
    """(tfrec_fast or None, why not) for --writer; exits when tfrec_fast is asked for and missing."""
    ensure_dirs()
    tfr, why = (None, "python writer requested") if args.writer == "python" else probe_tfrec_fast()
    if args.writer == "tfrec_fast" and tfr is None:
        sys.exit(f"error: {why}")
    return tfr, why


def ensure_dirs() -> None:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / "logs").mkdir(parents=True, exist_ok=True)


def log_dir(tag: str) -> Path:
    """Where the case processes of one measurement write their stderr."""
    return OUT_DIR / "logs" / tag
