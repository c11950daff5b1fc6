#!/usr/bin/env bash
# Run every tfrec_fast benchmark with the peers venv and write bench/RESULTS.md.
#
#   bash bench/run_all.sh [--quick] [--smoke] [--no-install] [-- extra args for bench_read.py]
#
#   --quick       fewer repeats (3 read / 1 write / 5 CRC samples)
#   --smoke       every script end to end on small data with one repeat, into bench/out/RESULTS.md
#                 (a check that the benchmarks run, not a measurement)
#   --no-install  do not (re)install tfrec_fast from this checkout into the venv
#   BENCHENV=DIR  the peers venv (default /work/benchenv; created from bench/requirements.txt if missing)
#
# tfrec_fast is installed with `pip install --no-deps --force-reinstall <repo>`; when that fails the
# old install is removed (never measure a stale build) and the tfrec_fast rows are skipped with a note.
set -uo pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$BENCH")
VENV=${BENCHENV:-/work/benchenv}
PY=$VENV/bin/python
CMDLINE="bash bench/run_all.sh $*"

QUICK=0
SMOKE=0
INSTALL=1
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --smoke) SMOKE=1 ;;
    --no-install) INSTALL=0 ;;
    --) shift; EXTRA+=("$@"); break ;;
    *) EXTRA+=("$1") ;;
  esac
  shift
done

OUT=$BENCH/out
mkdir -p "$OUT/logs" "$BENCH/data"

if [ ! -x "$PY" ]; then
  echo "== creating the peers venv $VENV"
  python3 -m venv "$VENV" || exit 1
  "$PY" -m pip install -q -r "$BENCH/requirements.txt" || exit 1
fi

INSTALL_NOTE=""
if [ "$INSTALL" = 1 ]; then
  echo "== pip install $REPO into $VENV (log: $OUT/logs/pip-install.log)"
  if "$PY" -m pip install --no-deps --force-reinstall "$REPO" >"$OUT/logs/pip-install.log" 2>&1; then
    INSTALL_NOTE="tfrec_fast installed from $REPO for this run."
  else
    echo "   pip install failed; tfrec_fast rows will be skipped. Tail of the log:"
    tail -5 "$OUT/logs/pip-install.log" | sed 's/^/   | /'
    "$PY" -m pip uninstall -y tfrec_fast >/dev/null 2>&1
    INSTALL_NOTE="**pip install of $REPO failed** (see bench/out/logs/pip-install.log): tfrec_fast rows skipped."
  fi
else
  INSTALL_NOTE="tfrec_fast not reinstalled (--no-install): whatever is in $VENV was measured."
fi

echo "== data"
if [ "$SMOKE" = 1 ]; then
  DATA_ARGS=(--large-records 40 --small-records 20000)
  EXAMPLE_DATA_ARGS=(--records 3000)
  RESULTS=$OUT/RESULTS.md
else
  DATA_ARGS=()
  EXAMPLE_DATA_ARGS=()
  RESULTS=$BENCH/RESULTS.md
fi
"$PY" "$BENCH/make_data.py" "${DATA_ARGS[@]}" || exit 1
"$PY" "$BENCH/make_example_data.py" "${EXAMPLE_DATA_ARGS[@]}" || exit 1
cat "$BENCH"/data/*.tfrecord >/dev/null  # warm the page cache

if [ "$SMOKE" = 1 ]; then
  READ_ARGS=(--repeats 1 --write-repeats 1 --min-time 0)
  CRC_ARGS=(--repeats 1 --min-time 0)
  EXAMPLE_ARGS=(--repeats 1 --min-time 0)
  TORCH_ARGS=(--repeats 1 --min-time 0 --n-access 2048)
  CONVERT_ARGS=(--repeats 1 --per-class 12)
elif [ "$QUICK" = 1 ]; then
  READ_ARGS=(--repeats 3 --write-repeats 1)
  CRC_ARGS=(--repeats 5)
  EXAMPLE_ARGS=(--repeats 3)
  TORCH_ARGS=(--repeats 3)
  CONVERT_ARGS=(--repeats 3)
else
  READ_ARGS=()
  CRC_ARGS=()
  EXAMPLE_ARGS=()
  TORCH_ARGS=()
  CONVERT_ARGS=()
fi

echo "== CRC32C"
"$PY" "$BENCH/bench_crc.py" "${CRC_ARGS[@]}" --markdown "$OUT/crc.md" --json "$OUT/crc.json" >/dev/null || echo "bench_crc.py failed" >"$OUT/crc.md"
echo "== read / write / RSS"
"$PY" "$BENCH/bench_read.py" "${READ_ARGS[@]}" "${EXTRA[@]}" --markdown "$OUT/read.md" --json "$OUT/read.json" >/dev/null \
  || echo "bench_read.py failed" >"$OUT/read.md"
echo "== Example codec (parse / encode)"
"$PY" "$BENCH/bench_example.py" "${EXAMPLE_ARGS[@]}" --markdown "$OUT/example.md" --json "$OUT/example.json" >/dev/null \
  || echo "bench_example.py failed" >"$OUT/example.md"
echo "== PyTorch DataLoader and random access"
"$PY" "$BENCH/bench_torch.py" "${TORCH_ARGS[@]}" --markdown "$OUT/torch.md" --json "$OUT/torch.json" >/dev/null \
  || echo "bench_torch.py failed" >"$OUT/torch.md"
echo "== converting a folder of JPEGs (makes bench/data/jpeg_folder/ once)"
"$PY" "$BENCH/bench_convert.py" "${CONVERT_ARGS[@]}" --markdown "$OUT/convert.md" --json "$OUT/convert.json" >/dev/null \
  || echo "bench_convert.py failed" >"$OUT/convert.md"

{
  echo "# tfrec_fast benchmark results"
  echo
  echo "- Command: \`$CMDLINE\` (from $REPO)"
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- $INSTALL_NOTE"
  echo
  echo "## Machine and versions"
  echo
  "$PY" "$BENCH/envinfo.py"
  echo
  echo "A shared, noisy 2-core VM: read the ratios (all measured in this same run) rather than the absolute numbers."
  echo
  echo "## CRC32C"
  echo
  cat "$OUT/crc.md"
  echo
  echo "## Reading and writing"
  echo
  cat "$OUT/read.md"
  echo
  echo "## Example codec (tf.train.Example parse / encode)"
  echo
  cat "$OUT/example.md"
  echo
  echo "## PyTorch DataLoader and random access"
  echo
  cat "$OUT/torch.md"
  echo
  echo "## Converting a folder of JPEGs"
  echo
  cat "$OUT/convert.md"
} >"$RESULTS"

echo "== wrote $RESULTS"
cat "$RESULTS"
