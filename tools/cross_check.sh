#!/usr/bin/env bash
# Compiles (does not link) the C++ core for the systems CI cannot run, with zig's bundled clang
# and the project's warnings as errors, so that POSIX-only or GCC-only code cannot creep back:
#   x86_64-windows-gnu   the Windows API and MinGW's C runtime headers
#   aarch64-macos.11.0   Apple silicon at the wheels' deployment target (ARMv8 CRC and NEON varint
#                        backends)
#   x86_64-macos.11.0    Intel Macs at the wheels' deployment target
#   x86_64-macos.10.13   a source build for older macOS (no preadv before 11: one read per span)
#   aarch64-linux-gnu    Linux on ARM (getauxval CPU probe, ARMv8 CRC and NEON varint backends)
# and, for x86_64-windows-gnu again, the MSVC branches of portable.h and crc32c.cc (cl.exe's
# intrinsics) against MinGW's declarations of the same intrinsics.
# zig ships no MSVC headers (x86_64-windows-msvc cannot be compiled here; the wheel workflow builds
# with MSVC on Windows), so a lint stands in for the rest of what only MSVC rejects: GCC builtins,
# inline asm and pragmas outside portable.h and crc32c.cc, POSIX types and OS headers outside the
# platform layer.
# The bindings (src/cpp/python) need each target's Python headers and are not compiled here.
#
# Usage:  bash tools/cross_check.sh   (installs the pinned ziglang into .venv-zig beside the repo
#         if absent; needs zlib's headers on this machine). ~30 s; ~1.5 min with the install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CORE="$ROOT/src/cpp/core"
ZIGLANG_VERSION=0.17.1
VENV="${ZIG_VENV:-$ROOT/.venv-zig}"
if ! "$VENV/bin/python" -m ziglang version >/dev/null 2>&1; then
  python3 -m venv "$VENV" && "$VENV/bin/pip" install -q "ziglang==$ZIGLANG_VERSION"
fi
status=0

# ---- lint: what MSVC would reject, outside the files that keep it behind #if --------------------
lint() {  # lint REGEX WHAT ALLOWED-FILE...
  local regex=$1 what=$2
  shift 2
  local file
  for file in "$CORE"/*.h "$CORE"/*.cc; do
    [[ " $* " == *" $(basename "$file") "* ]] && continue
    if grep -qE "$regex" "$file"; then
      echo "FAIL lint: $what in $(basename "$file") (allowed only in $*):"
      grep -nE "$regex" "$file" | head -n 5
      status=1
    fi
  done
}
lint '__builtin_|__attribute__|__asm__|\basm\(|<cpuid\.h>|#pragma GCC' "GCC builtin, asm or pragma" \
  portable.h cpu_features.cc
lint '\b(ssize_t|off_t)\b' "POSIX type" platform_posix.cc
lint '#include <(unistd|fcntl|windows|io)\.h>|#include <(sys|asm)/' "OS header" \
  platform_posix.cc platform_windows.cc cpu_features.cc

# ---- compiles -----------------------------------------------------------------------------------
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
# zlib.h is the one header from outside the standard library and zig ships none: copy this
# machine's zlib.h and zconf.h alone, so that no other header of the host can stand in for one
# the target lacks (an -isystem /usr/include would).
mkdir "$OUT/zlib"
for header in zlib.h zconf.h; do
  found=$(echo '#include <zlib.h>' | cc -xc -E -H - 2>&1 >/dev/null | grep -m1 "/$header\$" |
          sed 's/^\.* //') || true
  if [ -z "$found" ]; then
    echo "cross_check: $header not found (Debian/Ubuntu: apt-get install zlib1g-dev)"
    exit 1
  fi
  cp "$found" "$OUT/zlib/"
done

# One line per compile: "target file flags...". The ISA files and backends follow CMakeLists.txt.
jobs_list() {
  local target src extra defines
  for target in x86_64-windows-gnu aarch64-macos.11.0 x86_64-macos.11.0 x86_64-macos.10.13 \
                aarch64-linux-gnu; do
    case $target in
      x86_64*) defines="-DTFREC_HAVE_SSE42_BACKEND=1 -DTFREC_HAVE_AVX512_BACKEND=1 -DTFREC_HAVE_X86_VARINTS=1" ;;
      aarch64*) defines="-DTFREC_HAVE_ARM64_BACKEND=1 -DTFREC_HAVE_NEON_VARINTS=1" ;;
    esac
    for src in "$CORE"/*.cc; do
      extra=""
      case "${target%%-*}:$(basename "$src")" in
        aarch64:crc32c_sse42.cc | aarch64:crc32c_avx512.cc | x86_64:crc32c_arm64.cc) continue ;;
        aarch64:varint_avx2.cc | aarch64:varint_avx512.cc | x86_64:varint_neon.cc) continue ;;
        x86_64:crc32c_sse42.cc) extra="-msse4.2 -mpclmul" ;;
        x86_64:crc32c_avx512.cc) extra="-mavx512f -mvpclmulqdq -msse4.2 -mpclmul" ;;
        x86_64:varint_avx2.cc) extra="-mavx2" ;;
        x86_64:varint_avx512.cc) extra="-mavx512f -mavx512bw -mavx2" ;;
        aarch64:crc32c_arm64.cc) extra="-mcpu=generic+crc" ;;  # zig's spelling of armv8-a+crc
        aarch64:*) extra="-mcpu=generic" ;;                     # the baseline (NEON), as CMake builds
      esac
      echo "$target $src $defines${extra:+ $extra}"  # no trailing blank: xargs -L would join lines
    done
  done
  # The MSVC branches (cl.exe's intrinsics instead of GCC builtins) against MinGW's declarations
  # of the same intrinsics; -mxsave only because clang wants it for _xgetbv, which cl does not.
  # (The ISA files have no such branches.)
  for src in "$CORE"/*.cc; do
    case "$(basename "$src")" in
      crc32c_arm64.cc | crc32c_sse42.cc | crc32c_avx512.cc | varint_avx2.cc | varint_avx512.cc | \
      varint_neon.cc) continue ;;
    esac
    echo "x86_64-windows-gnu $src -DTFREC_HAVE_SSE42_BACKEND=1 -DTFREC_HAVE_AVX512_BACKEND=1" \
         "-DTFREC_HAVE_X86_VARINTS=1 -DTFR_MSVC_INTRINSICS=1 -mxsave"
  done
}

compile() {  # compile TARGET FILE FLAGS...
  local target=$1 src=$2
  shift 2
  local out
  out="$OUT/$target-$(basename "$src")-$(echo "$*" | cksum | cut -d' ' -f1).o"
  if ! "$VENV/bin/python" -m ziglang c++ -target "$target" -std=c++17 -c -Wall -Wextra -Wpedantic \
       -Wshadow -Wconversion -Wno-sign-conversion -Werror -Wno-unused-command-line-argument \
       -I "$CORE" -isystem "$OUT/zlib" "$@" "$src" -o "$out" 2>"$out.err"; then
    echo "FAIL $target $(basename "$src") $*"
    head -n 20 "$out.err"
    return 1
  fi
}
export -f compile
export VENV CORE OUT

start=$SECONDS
if ! jobs_list | xargs -P "$(nproc)" -L 1 bash -c 'compile "$@"' _; then
  status=1
fi
echo "cross_check: $(jobs_list | wc -l) compiles (Windows x86_64, macOS arm64/x86_64, Linux" \
     "aarch64) in $((SECONDS - start)) s"
if [ "$status" -ne 0 ]; then
  echo "cross_check: FAILED"
  exit 1
fi
echo "cross_check: OK"
