#!/usr/bin/env bash
# Build tfrec_fast with AddressSanitizer + UndefinedBehaviorSanitizer (TFREC_SANITIZE=ON) and run
# the C++ CRC32C test program (once per backend) and the whole pytest suite against that build.
#
# Usage:  tools/sanitize.sh [pytest args...]   e.g. tools/sanitize.sh -x -k reader, or name test
#         files (tools/sanitize.sh tests/test_mutation.py) to run only those
# Env:    PYTHON  interpreter with the project's deps, i.e. `pip install ".[test]"` (default: python3)
#         BUILD   build directory (default: <repo>/build/asan)
# Needs cmake (+ ninja if present), pybind11 and GCC; exits non-zero on any test failure or any
# sanitizer report (reports go to $BUILD/logs, also from subprocesses, and are printed at the end).
# What runs differently from plain pytest, and why, is in steps 3 and 5; docs/HARDENING.md has
# the timings.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$(command -v "${PYTHON:-python3}")"
BUILD="${BUILD:-$ROOT/build/asan}"
LOGS="$BUILD/logs"
PKG="$BUILD/pkg"

# 1. Configure and build (-O1 -g: usable stacks, sane speed). Never touches build/dev.
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$ROOT" -B "$BUILD" "${gen[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DTFREC_SANITIZE=ON -DTFREC_BUILD_TESTS=ON \
  -DPython_EXECUTABLE="$PY" -Dpybind11_DIR="$("$PY" -m pybind11 --cmakedir)" >/dev/null
cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 2)"

# 2. A private package dir: the Python sources plus the sanitized extension (no dev symlink).
rm -rf "$PKG" "$LOGS" && mkdir -p "$PKG/tfrec_fast" "$LOGS"
#    Recursive (subpackages too), leaving out any _core*.so (the dev build or its symlink) and
#    __pycache__.
cp -R "$ROOT/src/tfrec_fast/." "$PKG/tfrec_fast/"
find "$PKG/tfrec_fast" \( -name '_core*.so' -o -name __pycache__ \) -prune -exec rm -rf {} +
cp "$BUILD"/_core*.so "$PKG/tfrec_fast/"

# 3. Sanitizer runtime: the interpreter is not instrumented, so libasan must be preloaded. Take the
#    exact libraries the extension links against (fallback: ask the compiler).
so=("$BUILD"/_core*.so)
rt() { ldd "${so[0]}" | awk -v l="$1" '$1 ~ "^"l"\\.so" {print $3}' | grep . \
         || "${CXX:-c++}" -print-file-name="$1.so"; }
preload="$(rt libasan) $(rt libubsan)"
# Reports go to files ($LOGS/<tool>.<pid>) so none is lost inside a captured subprocess.
# Python leaks by design: leak checking only for the pure C++ program.
asan_common="log_path=$LOGS/asan:check_initialization_order=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$LOGS/ubsan"
# GCC's libubsan ignores log_path when it runs next to ASan (its report would vanish into pytest's
# or a test's captured stderr): set the report path from Python, in every interpreter started.
export TFREC_UBSAN_LIB="$(rt libubsan)" TFREC_UBSAN_LOG="$LOGS/ubsan"
# GCC 12's libasan does not take its allocator locks around fork() (LLVM added that in 18,
# llvm/llvm-project#75290): a child forked while another thread of the parent is inside malloc
# hangs for good (seen: a DataLoader worker stuck in asan_malloc). So multiprocessing starts its
# processes (DataLoader workers, process pools) from a single-threaded forkserver here; the tests
# that call os.fork() themselves still fork directly. A test that hands a worker something only
# fork can pass (a local function) cannot run so: NEEDS_FORK in step 5 lists them.
export TFREC_SANITIZE_FORKSERVER=1
cat >"$PKG/sitecustomize.py" <<'PY'
import ctypes, os
if os.environ.get("TFREC_UBSAN_LIB") and os.environ.get("TFREC_UBSAN_LOG"):
    ctypes.CDLL(os.environ["TFREC_UBSAN_LIB"]).__sanitizer_set_report_path(
        os.environ["TFREC_UBSAN_LOG"].encode())
if os.environ.get("TFREC_SANITIZE_FORKSERVER"):
    import multiprocessing
    multiprocessing.set_start_method("forkserver", force=True)
PY

# 4. C++ CRC32C tests, once per backend this CPU can run (an unavailable one falls back silently).
crc_summary=() crc_fail=0
avail="$("$BUILD/test_crc32c" | sed -n 's/^active backend: .*available: *//p')" || true
for b in portable sse42 avx512 arm64; do
  if [[ " $avail " != *" $b "* ]]; then crc_summary+=("$b: n/a on this CPU"); continue; fi
  if out="$(TFREC_FAST_CRC32C=$b ASAN_OPTIONS="detect_leaks=1:$asan_common" "$BUILD/test_crc32c")" \
     && grep -q "^active backend: $b;" <<<"$out"; then
    crc_summary+=("$b: $(tail -n1 <<<"$out")")
  else
    crc_summary+=("$b: FAILED"); crc_fail=1; printf '%s\n' "$out" | tail -n 20
  fi
done

# 4b. The core's own test programs (records, random access, Example decoder), leaks checked.
for t in test_record_reader test_record_writer test_random_access test_example_decoder; do
  if out="$(ASAN_OPTIONS="detect_leaks=1:$asan_common" "$BUILD/$t")"; then
    crc_summary+=("$t: $(tail -n1 <<<"$out")")
  else
    crc_summary+=("$t: FAILED"); crc_fail=1; printf '%s\n' "$out" | tail -n 20
  fi
done

# 5. The whole pytest suite (subprocesses inherit the environment). PYTHONMALLOC=malloc lets ASan
#    see Python's small allocations too. Two passes:
#    a) the default selection (bigdisk deselected), less tests/test_cpp.py, which builds a
#       separate, unsanitized -Werror tree and runs its test program (it never loads this
#       extension; step 4 runs the sanitized program) and takes minutes under the preloaded
#       runtime;
#    b) the test that bounds RSS growth (128 MiB) while streaming a 5 GiB file: marked bigdisk,
#       so selected here with -m bigdisk (needs ~5.5 GiB free in the temporary directory), with
#       ASan's quarantine of freed memory cut from 256 to 16 MiB: the default quarantine alone
#       grows RSS past the bound (measured: 172 MiB growth with 256, 18 MiB with 16).
#    Left out of both: NEEDS_FORK (see step 3). A pass that selects no test (pytest's exit code
#    5) fails: a check that did not run has not passed.
RSS_BOUND=tests/test_big_files.py::test_stream_5gib_file_with_bounded_memory
NEEDS_FORK=(tests/test_worker_ring.py::test_dataloader_with_a_transform)
run_pytest() {  # run_pytest EXTRA_ASAN_OPTIONS PYTEST_ARGS...
  local extra="$1"; shift
  ( cd "$ROOT" && env LD_PRELOAD="$preload" ASAN_OPTIONS="detect_leaks=0:$asan_common$extra" \
      PYTHONMALLOC=malloc PYTHONPATH="$PKG${PYTHONPATH:+:$PYTHONPATH}" \
      "$PY" -m pytest -p no:cacheprovider "$@" )
}
# The tests must import this build, not an installed tfrec_fast.
got="$(cd "$ROOT" && env LD_PRELOAD="$preload" ASAN_OPTIONS="detect_leaks=0:$asan_common" \
         PYTHONPATH="$PKG${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c \
         'import tfrec_fast._core as c; print(c.__file__)')"
[[ "$got" == "$PKG/tfrec_fast/"* ]] || { echo "sanitize.sh: tests would import $got" >&2; exit 1; }
# Arguments naming tests (not starting with -) replace the whole suite in pass (a). Pass (b) runs
# when the whole suite does (nothing named, no -k or -m), or when it is named itself (then pass
# (a) runs only the other names, if any).
targets=(tests) options=() named=() rss_named=0 value_of=""
for arg in "$@"; do
  if [[ -n $value_of || $arg == -* ]]; then
    options+=("$arg")
    value_of=""  # an option's value (-k EXPR) is not a test name
    [[ $arg == -k || $arg == -m || $arg == -p || $arg == --deselect || $arg == --ignore ]] \
      && value_of=$arg
  elif [[ $arg == "$RSS_BOUND" ]]; then rss_named=1
  else named+=("$arg"); fi
done
(( ${#named[@]} )) && targets=("${named[@]}")
selecting=0
for opt in "${options[@]}"; do [[ $opt == -k* || $opt == -m* ]] && selecting=1; done
run_rss=$rss_named
(( ! ${#named[@]} && ! rss_named && ! selecting )) && run_rss=1
set +e
pytest_rc="not run"
if (( ${#named[@]} || ! rss_named )); then
  run_pytest "" "${targets[@]}" --ignore=tests/test_cpp.py \
    "${NEEDS_FORK[@]/#/--deselect=}" "${options[@]}"
  pytest_rc=$?
fi
rss_rc="not run"
if (( run_rss )); then
  run_pytest ":quarantine_size_mb=16" -m bigdisk "$RSS_BOUND" -rA
  rss_rc=$?
fi
set -e

# 6. Summary.
reports=("$LOGS"/*)
[[ -e "${reports[0]}" ]] || reports=()
for f in "${reports[@]}"; do echo "==== sanitizer report: $f"; head -n 40 "$f"; done
echo "================ sanitize.sh summary ================"
printf 'C++ tests    %s\n' "${crc_summary[@]}"
echo "pytest       exit code $pytest_rc (the suite), $rss_rc (the RSS-bound test); 5: selected none"
echo "sanitizer    ${#reports[@]} report file(s) in $LOGS"
echo "not run      tests/test_cpp.py (an unsanitized build of its own) ${NEEDS_FORK[*]} (need fork)"
failed=0
for rc in "$pytest_rc" "$rss_rc"; do [[ $rc == "not run" || $rc == 0 ]] || failed=1; done
if (( crc_fail || failed || ${#reports[@]} )); then echo "RESULT: FAIL"; exit 1; fi
echo "RESULT: clean"
