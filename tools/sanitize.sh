#!/usr/bin/env bash
# Build tfrec_fast with AddressSanitizer + UndefinedBehaviorSanitizer (TFREC_SANITIZE=ON) and run
# the C++ CRC32C test program (once per backend) and the whole pytest suite against that build.
#
# Usage:  tools/sanitize.sh [extra pytest args...]     e.g.  tools/sanitize.sh -x -k reader
# Env:    PYTHON  interpreter with the project's deps, i.e. `pip install ".[test]"` (default: python3)
#         BUILD   build directory (default: <repo>/build/asan)
# Needs cmake (+ ninja if present), pybind11 and GCC; exits non-zero on any test failure or any
# sanitizer report (reports go to $BUILD/logs, also from subprocesses, and are printed at the end).
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
find "$ROOT/src/tfrec_fast" -maxdepth 1 -type f ! -name '_core*' -exec cp {} "$PKG/tfrec_fast/" \;
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
cat >"$PKG/sitecustomize.py" <<'PY'
import ctypes, os
if os.environ.get("TFREC_UBSAN_LIB") and os.environ.get("TFREC_UBSAN_LOG"):
    ctypes.CDLL(os.environ["TFREC_UBSAN_LIB"]).__sanitizer_set_report_path(
        os.environ["TFREC_UBSAN_LOG"].encode())
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

# 5. The whole pytest suite (subprocesses inherit the environment). PYTHONMALLOC=malloc lets ASan
#    see Python's small allocations too.
set +e
( cd "$ROOT" && env LD_PRELOAD="$preload" ASAN_OPTIONS="detect_leaks=0:$asan_common" \
    PYTHONMALLOC=malloc PYTHONPATH="$PKG${PYTHONPATH:+:$PYTHONPATH}" \
    "$PY" -m pytest tests -p no:cacheprovider "$@" )
pytest_rc=$?
set -e

# 6. Summary.
reports=("$LOGS"/*)
[[ -e "${reports[0]}" ]] || reports=()
for f in "${reports[@]}"; do echo "==== sanitizer report: $f"; head -n 40 "$f"; done
echo "================ sanitize.sh summary ================"
printf 'test_crc32c  %s\n' "${crc_summary[@]}"
echo "pytest       exit code $pytest_rc"
echo "sanitizer    ${#reports[@]} report file(s) in $LOGS"
if (( crc_fail || pytest_rc || ${#reports[@]} )); then echo "RESULT: FAIL"; exit 1; fi
echo "RESULT: clean"
