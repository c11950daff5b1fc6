#!/usr/bin/env bash
# Run the tfrec_fast benchmarks and replace their sections of bench/RESULTS.md.
#
#   bash bench/run_all.sh [--only NAME[,NAME...]] [--quick | --smoke] [--no-install | --source]
#                         [-- extra args for every script run]
#
#   --only LIST   run these benchmarks only (default: all); the other sections of RESULTS.md are kept
#   --quick       fewer repeats
#   --smoke       small data, one repeat, into bench/out/RESULTS.md (a check that the benchmarks run,
#                 not a measurement; bench/out/ is git-ignored; a copy of bench/RESULTS.md when missing)
#   --no-install  do not (re)install tfrec_fast from this checkout into the venv
#   --source      measure this checkout's source tree: PYTHONPATH=<checkout>/src, no install (the
#                 extension must be built and linked into src/tfrec_fast/: see bench/README.md)
#   BENCHENV=DIR  the peers venv (default /work/benchenv; created from bench/requirements.txt if missing)
#
# Benchmarks (NAME: script): crc, read, example, parse, torch, convert, remote, arrow, ray, tfds,
# threads, grain, resume (bench_resume.py, when the file exists). Each has a section of RESULTS.md
# between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->`; a run rewrites the sections it ran and
# keeps the others, so the file holds the latest table of every benchmark. A section starts with
# the run_all.sh command, the machine and package versions, then the script's Markdown, which the
# harness heads with the script's command and commit and ends with its computed target marks.
#
# Exits non-zero when anything failed: the install, the data, or a benchmark (the script's exit
# status, or a failed row in its JSON). A failed benchmark's section says so at its top, with the
# tail of its log; when the script wrote no table, the old table is removed, never left stale.
set -uo pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$BENCH")
VENV=${BENCHENV:-/work/benchenv}
PY=$VENV/bin/python
CMDLINE="bash bench/run_all.sh${*:+ $*}"
ALL=(crc read example parse torch convert remote arrow ray tfds threads grain resume)

MODE=full
INSTALL=1
SOURCE=0
ONLY=""
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) MODE=quick ;;
    --smoke) MODE=smoke ;;
    --no-install) INSTALL=0 ;;
    --source) SOURCE=1; INSTALL=0 ;;
    --only) shift; ONLY=${1:-} ;;
    --only=*) ONLY=${1#--only=} ;;
    -h|--help) sed -n '2,/^set -uo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    --) shift; EXTRA+=("$@"); break ;;
    *) echo "unknown option: $1 (see the top of bench/run_all.sh)" >&2; exit 2 ;;
  esac
  shift
done

script_of() { echo "bench_$1.py"; }
title_of() {
  case "$1" in
    crc) echo "CRC32C" ;;
    read) echo "Reading and writing raw records" ;;
    example) echo "Example codec: parse and encode" ;;
    parse) echo "Parsing at memory speed: read + parse by record shape" ;;
    torch) echo "PyTorch DataLoader and random access" ;;
    convert) echo "Converting a folder of JPEGs" ;;
    remote) echo "Remote data: HTTP and S3 on 127.0.0.1" ;;
    arrow) echo "Arrow" ;;
    ray) echo "Ray Data" ;;
    tfds) echo "TFDS-prepared datasets" ;;
    threads) echo "Threads and every entry point" ;;
    grain) echo "Grain data sources" ;;
    resume) echo "Resuming an epoch" ;;
  esac
}

# The benchmarks to run, in the order of ALL.
NAMES=()
if [ -z "$ONLY" ]; then
  for n in "${ALL[@]}"; do
    [ "$n" = resume ] && [ ! -f "$BENCH/bench_resume.py" ] && continue
    NAMES+=("$n")
  done
else
  IFS=, read -ra WANT <<<"$ONLY"
  for w in "${WANT[@]}"; do
    [ -n "$(title_of "$w")" ] || { echo "--only: unknown benchmark '$w' (known: ${ALL[*]})" >&2; exit 2; }
    [ -f "$BENCH/$(script_of "$w")" ] || { echo "--only: bench/$(script_of "$w") does not exist" >&2; exit 2; }
  done
  for n in "${ALL[@]}"; do
    [[ ",$ONLY," == *",$n,"* ]] && NAMES+=("$n")
  done
fi
wants() { [[ " ${NAMES[*]} " == *" $1 "* ]]; }

OUT=$BENCH/out
mkdir -p "$OUT/logs" "$OUT/sections" "$BENCH/data"
if [ "$MODE" = smoke ]; then
  RESULTS=$OUT/RESULTS.md
  [ -f "$RESULTS" ] || cp "$BENCH/RESULTS.md" "$RESULTS"
else
  RESULTS=$BENCH/RESULTS.md
fi

if [ ! -x "$PY" ]; then
  echo "== creating the peers venv $VENV"
  python3 -m venv "$VENV" || exit 1
  "$PY" -m pip install -q -r "$BENCH/requirements.txt" || exit 1
fi

FAILED=()
if [ "$SOURCE" = 1 ]; then
  export PYTHONPATH=$REPO/src${PYTHONPATH:+:$PYTHONPATH}
  if ! "$PY" -c "import tfrec_fast._core" >"$OUT/logs/source-import.log" 2>&1; then
    echo "--source: tfrec_fast._core does not import from $REPO/src (build the extension and link it" >&2
    echo "into src/tfrec_fast/ first, see bench/README.md); see bench/out/logs/source-import.log" >&2
    exit 1
  fi
  INSTALL_NOTE="tfrec_fast from the source tree (\`PYTHONPATH=$REPO/src\`, --source)"
elif [ "$INSTALL" = 1 ]; then
  echo "== pip install $REPO into $VENV (log: bench/out/logs/pip-install.log)"
  if "$PY" -m pip install --no-deps --force-reinstall "$REPO" >"$OUT/logs/pip-install.log" 2>&1; then
    INSTALL_NOTE="tfrec_fast installed from $REPO for this run"
  else
    echo "   pip install failed; tfrec_fast rows will be skipped (never measure a stale build). Tail of the log:"
    tail -5 "$OUT/logs/pip-install.log" | sed 's/^/   | /'
    "$PY" -m pip uninstall -y tfrec_fast >/dev/null 2>&1
    INSTALL_NOTE="**pip install of $REPO failed**: tfrec_fast rows skipped"
    FAILED+=("pip install of $REPO (bench/out/logs/pip-install.log)")
  fi
else
  INSTALL_NOTE="tfrec_fast not reinstalled (--no-install): whatever is in $VENV"
fi
if [ "${#FAILED[@]}" = 0 ] && ! "$PY" -c "import tfrec_fast" >/dev/null 2>&1; then
  echo "   tfrec_fast does not import in $VENV: its rows will be skipped"
  INSTALL_NOTE="$INSTALL_NOTE; **tfrec_fast does not import: its rows are skipped**"
  FAILED+=("tfrec_fast does not import in $VENV (rows skipped)")
fi

# ---- data: made only for the benchmarks that read it ----------------------------------------------
step() {  # step LOGNAME CMD...: a data step; a failure fails the run
  echo "== ${*:2} (log: bench/out/logs/$1.log)"
  if ! "${@:2}" >"$OUT/logs/$1.log" 2>&1; then
    echo "   FAILED; tail of the log:"; tail -5 "$OUT/logs/$1.log" | sed 's/^/   | /'
    FAILED+=("data step ${*:2} (bench/out/logs/$1.log)")
    return 1
  fi
}
if [ "$MODE" = smoke ]; then
  DATA_ARGS=(--large-records 40 --small-records 20000)
  EXAMPLE_DATA_ARGS=(--records 3000)
  PARSE_DATA_ARGS=(--scale 0.01)
else
  DATA_ARGS=()
  EXAMPLE_DATA_ARGS=()
  PARSE_DATA_ARGS=()
fi
if wants read || wants torch; then
  step make_data "$PY" "$BENCH/make_data.py" "${DATA_ARGS[@]}" && cat "$BENCH"/data/*.tfrecord >/dev/null  # warm the page cache
fi
if wants example || wants torch; then
  step make_example_data "$PY" "$BENCH/make_example_data.py" "${EXAMPLE_DATA_ARGS[@]}"
fi
if wants parse; then
  step make_parse_data "$PY" "$BENCH/bench_parse.py" --make-data "${PARSE_DATA_ARGS[@]}"
fi
if wants threads && [ ! -d "$BENCH/data/threads" ]; then  # ~1.5 GB, seeded: made once
  step make_threads_data "$PY" "$BENCH/bench_threads.py" --make-data
fi

# ---- arguments per benchmark and mode --------------------------------------------------------------
args_of() {  # sets ARGS for benchmark $1 in $MODE
  ARGS=()
  case "$MODE:$1" in
    smoke:crc) ARGS=(--repeats 1 --min-time 0 --sizes "4 KiB,1 MiB") ;;
    smoke:read) ARGS=(--repeats 1 --write-repeats 1 --min-time 0) ;;
    smoke:example) ARGS=(--repeats 1 --min-time 0) ;;
    smoke:parse) ARGS=(--repeats 1 --min-time 0 --fresh-processes 1) ;;
    smoke:torch) ARGS=(--repeats 1 --min-time 0 --n-access 2048) ;;
    smoke:convert) ARGS=(--repeats 1 --per-class 12) ;;
    smoke:remote) ARGS=(--repeats 1 --shards 2 --shard-mb 2 --plan-mb 1 --size-mb 4 --batches 2 --latency-ms 2) ;;
    smoke:arrow) ARGS=(--repeats 1 --min-time 0 --records 2000) ;;
    smoke:ray) ARGS=(--repeats 1 --records 2000 --shards 2 --nodes 1 --sources local) ;;
    smoke:tfds) ARGS=(--repeats 3 --min-time 0 --rlds-episodes 10) ;;
    smoke:threads) ARGS=(--repeats 1 --min-time 0 --no-rss) ;;
    smoke:grain) ARGS=(--repeats 1 --min-time 0 --records 2000 --shards 2) ;;
    smoke:resume) ARGS=(--repeats 1 --min-time 0) ;;
    quick:crc) ARGS=(--repeats 5) ;;
    quick:read) ARGS=(--repeats 3 --write-repeats 1) ;;
    quick:*) ARGS=(--repeats 3) ;;
  esac
}

# ---- run: bench/out/NAME.md, .json, logs/NAME.log; the section in bench/out/sections/NAME.md -------
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
ENVLINES=$("$PY" "$BENCH/envinfo.py" --brief 2>/dev/null || echo "- Machine: (bench/envinfo.py failed)")
run_one() {
  local name=$1 script
  script=$(script_of "$name")
  args_of "$name"
  rm -f "$OUT/$name.md" "$OUT/$name.json"
  echo "== $script ${ARGS[*]} ${EXTRA[*]} (log: bench/out/logs/$name.log)"
  "$PY" "$BENCH/$script" "${ARGS[@]}" "${EXTRA[@]}" --markdown "$OUT/$name.md" --json "$OUT/$name.json" \
    >"$OUT/logs/$name.log" 2>&1
  local rc=$? why=""
  if [ "$rc" != 0 ]; then
    why="\`$script\` exited with status $rc"
  elif [ ! -s "$OUT/$name.md" ]; then
    why="\`$script\` wrote no table"
  elif [ -s "$OUT/$name.json" ] && ! (cd "$BENCH" && "$PY" -c '
import json, sys, _common
failed = _common.harness.failures(json.load(open(sys.argv[1])))
print("\n".join(failed)); sys.exit(1 if failed else 0)' "$OUT/$name.json" >"$OUT/logs/$name.failures" 2>&1); then
    why="\`$script\` exited 0 but its JSON has failed rows: $(paste -sd ';' "$OUT/logs/$name.failures")"
  fi
  {
    echo "<!-- bench:$name -->"
    echo "## $(title_of "$name")"
    echo
    echo "- Run by \`$CMDLINE\` on $DATE; $INSTALL_NOTE."
    [ "$MODE" = smoke ] && echo "- **Smoke run** (small data, one repeat): proves the script runs; not a measurement."
    echo "$ENVLINES"
    echo
    if [ -n "$why" ]; then
      echo "**FAILED in this run: $why** (log: \`bench/out/logs/$name.log\`, not kept in git)."
      if [ -s "$OUT/$name.md" ]; then
        echo "What it wrote follows; its failed rows are listed under it."
      else
        echo "It wrote no table; the previous table of this section was removed. Tail of the log:"
        echo
        echo '```'
        tail -15 "$OUT/logs/$name.log"
        echo '```'
      fi
      echo
    fi
    [ -s "$OUT/$name.md" ] && cat "$OUT/$name.md"
    echo
    echo "<!-- /bench:$name -->"
  } >"$OUT/sections/$name.md"
  if [ -n "$why" ]; then
    FAILED+=("$name: $why (bench/out/logs/$name.log)")
    echo "   FAILED: $why; tail of the log:"
    tail -5 "$OUT/logs/$name.log" | sed 's/^/   | /'
  fi
}

RAN=()
for name in "${NAMES[@]}"; do
  run_one "$name"
  RAN+=("$OUT/sections/$name.md")
done

# ---- splice: the sections run now replace theirs; the others are kept; header and contents anew ----
TITLES=()
for n in "${ALL[@]}"; do  # a section for every script there is (a placeholder until it has run)
  [ -f "$BENCH/$(script_of "$n")" ] && TITLES+=("$n=$(title_of "$n")")
done
"$PY" - "$RESULTS" "${ALL[*]}" "${TITLES[@]}" -- "${RAN[@]}" <<'EOF' || FAILED+=("writing $RESULTS")
import re, sys
from pathlib import Path

results, order, rest = Path(sys.argv[1]), sys.argv[2].split(), sys.argv[3:]
cut = rest.index("--")
titles = dict(t.split("=", 1) for t in rest[:cut])
block = re.compile(r"<!-- bench:([\w-]+) -->\n.*?<!-- /bench:\1 -->\n?", re.S)
old = {m.group(1): m.group(0) for m in block.finditer(results.read_text())} if results.exists() else {}
new = {m.group(1): m.group(0) for f in rest[cut + 1:] for m in block.finditer(Path(f).read_text())}
sections = {**old, **new}
names = [n for n in order if n in sections or n in titles] + [n for n in sections if n not in order]
for n in names:
    if n not in sections:
        sections[n] = (f"<!-- bench:{n} -->\n## {titles[n]}\n\nNo table yet: run "
                       f"`bash bench/run_all.sh --only {n}`.\n\n<!-- /bench:{n} -->\n")
def anchor(title):
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
def title(n):
    m = re.search(r"^## (.+)$", sections[n], re.M)
    return m.group(1) if m else n
head = """# tfrec_fast benchmark results

The latest table of every benchmark in `bench/`, each section written by `bash bench/run_all.sh`
(all of them) or `bash bench/run_all.sh --only NAME` (one), which replaces only the sections it
ran. Every section names the command, the commit and the machine that made it, and its target
marks (✅/❌, "met"/"MISSED") are computed from the figures of that same run. The machine is
usually a shared 2-vCPU KVM VM: read the ratios between rows of one table, not the absolute
figures across tables. A section marked _Migrated_ still holds the last table recorded by hand
before this file was generated, with the provenance recorded then. History is in git
(`git log -p bench/RESULTS.md`); how the scripts measure is in `bench/README.md`.

"""
toc = "".join(f"- [{title(n)}](#{anchor(title(n))}) (`{n}`)\n" for n in names)
body = "\n".join(sections[n].rstrip("\n") + "\n" for n in names)
results.write_text(head + toc + "\n" + body)
EOF

echo "== wrote $RESULTS (sections run: ${NAMES[*]})"
if [ "${#FAILED[@]}" -gt 0 ]; then
  printf '\n== FAILED:\n' >&2
  printf '   %s\n' "${FAILED[@]}" >&2
  exit 1
fi
