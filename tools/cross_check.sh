#!/usr/bin/env bash
# Compiles (does not link) the C++ core for other operating systems with zig's bundled clang:
# x86_64 Windows (MinGW headers), macOS on arm64 and x86_64, Linux on aarch64,
# with the project's warnings as errors. What it catches: a POSIX-only call, header or builtin
# leaking past the platform layer (src/cpp/core/platform_*.cc, portable.h).
#
# Usage:  bash tools/cross_check.sh      (installs ziglang into .venv-zig beside the repo if absent)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ZIG_VENV:-$ROOT/.venv-zig}"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import ziglang" 2>/dev/null; then
  python3 -m venv "$VENV" && "$VENV/bin/pip" install -q ziglang
fi
ZIG=("$VENV/bin/python" -m ziglang)
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
# zlib.h is the only header from outside the standard library; zig ships none, so give it a
# declaration-only stand-in from Python's zlib headers when the system has them.
ZLIB_DIR="$(dirname "$(find /usr/include -maxdepth 2 -name zlib.h | head -n1)")"
FLAGS=(-std=c++17 -c -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion -Werror
       -Wno-unused-command-line-argument
       -I "$ROOT/src/cpp/core" -isystem "$ZLIB_DIR")
status=0
# (x86_64-windows-msvc needs the Windows SDK headers, which zig does not ship: MSVC builds are
# checked by the wheel workflow on Windows runners.)
for target in x86_64-windows-gnu aarch64-macos x86_64-macos aarch64-linux-gnu; do
  failed=0
  for src in "$ROOT"/src/cpp/core/*.cc; do
    extra=()
    # the x86 ISA files are only built for x86 targets (as CMakeLists.txt does)
    [[ $target == aarch64* && $(basename "$src") == crc32c_sse42.cc ]] && continue
    [[ $target == aarch64* && $(basename "$src") == crc32c_avx512.cc ]] && continue
    case "$(basename "$src")" in
      crc32c_sse42.cc) [[ $target == x86_64* ]] && extra=(-msse4.2 -mpclmul) ;;
      crc32c_avx512.cc) [[ $target == x86_64* ]] && extra=(-mavx512f -mvpclmulqdq -msse4.2 -mpclmul) ;;
      crc32c_arm64.cc) [[ $target == aarch64* ]] && extra=(-mcpu=generic+crc) ;;  # zig spells -march so
    esac
    defines=()
    [[ $target == x86_64* ]] && defines=(-DTFREC_HAVE_SSE42_BACKEND=1 -DTFREC_HAVE_AVX512_BACKEND=1)
    [[ $target == aarch64* ]] && defines=(-DTFREC_HAVE_ARM64_BACKEND=1)
    if ! "${ZIG[@]}" c++ -target "$target" "${FLAGS[@]}" "${defines[@]}" "${extra[@]}" "$src" \
         -o "$OUT/$(basename "$src").o" 2>"$OUT/err"; then
      echo "FAIL $target $(basename "$src")"; head -n 20 "$OUT/err"; failed=1; status=1
    fi
  done
  [ $failed -eq 0 ] && echo "ok   $target: every core source compiles"
done
exit $status
