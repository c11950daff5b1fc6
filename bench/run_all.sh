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
#
# Exits non-zero when anything failed: the install, the data, or a benchmark (a script that
# crashes, or a row that fails: an error, wrong output, a failed setup; the harness's exit status).
# The other benchmarks still run and RESULTS.md is still written, with the failures at its top.
# Each table starts with the command and commit that made it (the harness writes them).
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

FAILED=()
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
    FAILED+=("pip install of $REPO (bench/out/logs/pip-install.log)")
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

# bench NAME SCRIPT ARGS...: runs bench/SCRIPT into $OUT/NAME.md (log: $OUT/logs/NAME.log). A
# non-zero exit is recorded in FAILED; a script that died before writing its table leaves a note
# in its place.
bench() {
  local name=$1 script=$2
  shift 2
  rm -f "$OUT/$name.md"
  echo "== $script (log: $OUT/logs/$name.log)"
  "$PY" "$BENCH/$script" "$@" --markdown "$OUT/$name.md" --json "$OUT/$name.json" >"$OUT/logs/$name.log" 2>&1
  local rc=$?
  if [ "$rc" != 0 ]; then
    FAILED+=("$script exited $rc (bench/out/logs/$name.log)")
    echo "   FAILED: exit $rc; tail of the log:"
    tail -5 "$OUT/logs/$name.log" | sed 's/^/   | /'
    [ -s "$OUT/$name.md" ] || echo "**$script failed (exit $rc) before writing its table: see bench/out/logs/$name.log.**" >"$OUT/$name.md"
  fi
}

bench crc bench_crc.py "${CRC_ARGS[@]}"
bench read bench_read.py "${READ_ARGS[@]}" "${EXTRA[@]}"
bench example bench_example.py "${EXAMPLE_ARGS[@]}"
bench torch bench_torch.py "${TORCH_ARGS[@]}"
bench convert bench_convert.py "${CONVERT_ARGS[@]}"  # (makes bench/data/jpeg_folder/ once)

COMMIT="$(git -C "$REPO" rev-parse --short=12 HEAD 2>/dev/null || echo '?')"
[ -z "$(git -C "$REPO" status --porcelain --untracked-files=no 2>/dev/null)" ] || COMMIT="$COMMIT **+ uncommitted changes**"

{
  echo "# tfrec_fast benchmark results"
  echo
  echo "- Command: \`$CMDLINE\` (from $REPO, at commit $COMMIT)"
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- $INSTALL_NOTE"
  if [ "${#FAILED[@]}" -gt 0 ]; then
    echo "- **FAILED** (the tables below are incomplete or wrong where these failed):"
    printf '  - %s\n' "${FAILED[@]}"
  fi
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
if [ "${#FAILED[@]}" -gt 0 ]; then
  printf '\n== FAILED:\n' >&2
  printf '   %s\n' "${FAILED[@]}" >&2
  exit 1
fi
