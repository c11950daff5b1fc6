#!/usr/bin/env bash
# Build the libFuzzer targets (TFREC_FUZZ=ON: clang, AddressSanitizer + UndefinedBehaviorSanitizer)
# and run each for SECONDS, seeded from the conformance corpus (tests/data/conformance).
#
# Usage:  tools/fuzz.sh [SECONDS=60]
# Env:    BUILD   build directory (default: <repo>/build/fuzz); the grown corpora stay in
#                 $BUILD/corpus/<target>, so later runs go on from them
#         TFREC_FAST_CONFORMANCE  the corpus (default: <repo>/tests/data/conformance)
#         TFREC_FUZZ_DECODER=fast  the decoder target's fast mode: each input decoded by the learned
#                 layout and by the general paths alone, compared (no task-pool pass, no record
#                 decoded on its own): several times the inputs a second, for runs of hours
# Installs clang and libFuzzer (Debian: clang, libclang-rt-dev) with apt-get when missing.
# The two targets run side by side (one core each). Exits 1 on any finding (crash, sanitizer
# report, leak, timeout, out-of-memory) and prints the input that caused it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_EACH="${1:-60}"
BUILD="${BUILD:-$ROOT/build/fuzz}"
CONFORMANCE="${TFREC_FAST_CONFORMANCE:-$ROOT/tests/data/conformance}"
TARGETS=(fuzz_record_reader fuzz_example_decoder)
declare -A MAX_LEN=([fuzz_record_reader]=1048576 [fuzz_example_decoder]=65536)

# 1. clang with libFuzzer's runtime (Debian ships it in libclang-rt-<N>-dev, only recommended by
#    clang, so ask for it by name).
have_libfuzzer() {
  command -v clang++ >/dev/null &&
    [[ -e "$(clang++ -print-resource-dir)/lib/linux/libclang_rt.fuzzer-$(uname -m).a" ]]
}
if ! have_libfuzzer; then
  echo "fuzz.sh: installing clang and libFuzzer (apt-get)"
  sudo=(); (( EUID == 0 )) || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    clang libclang-rt-dev >/dev/null
  have_libfuzzer || { echo "fuzz.sh: no libFuzzer runtime after installing clang" >&2; exit 1; }
fi

# 2. Build (-O1 -g: usable stacks, sane speed).
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" "${gen[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DTFREC_FUZZ=ON -DTFREC_BUILD_PYTHON=OFF -DTFREC_BUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 2)" --target "${TARGETS[@]}"

# 3. Seeds from the conformance corpus (pure Python: no build of the package needed).
#    Reader: files (cut short) behind the two control bytes fuzz_record_reader.cc describes.
#    Decoder: single Example / SequenceExample payloads and runs of five, behind a header
#    of specs naming the features the corpus sidecar lists for that record.
SEEDS="$BUILD/seeds"
rm -rf "$SEEDS" && mkdir -p "$SEEDS/fuzz_record_reader" "$SEEDS/fuzz_example_decoder"
python3 - "$CONFORMANCE" "$SEEDS" "$ROOT/tests/fuzz/fuzz_example_decoder.cc" <<'PY'
import json, re, struct, sys
from pathlib import Path

corpus, seeds, decoder_src = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
if not corpus.is_dir():
    sys.exit(f"fuzz.sh: conformance corpus not found at {corpus}")
MAX_DECODER = 1 << 16
SEPARATOR = b"\xfeREC"
# The decoder target's spec names, read from its source so they are written down once.
names = re.findall(r'"([^"]*)"', re.search(r"kNames\[16\] = \{(.*?)\};", decoder_src.read_text(),
                                          re.S).group(1))
assert len(names) == 16, names


def records(data):
    """Payloads of an uncompressed TFRecord file (framing only; the corpus is trusted)."""
    pos, out = 0, []
    while pos + 12 <= len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        if pos + 16 + n > len(data):
            break
        out.append(data[pos + 12:pos + 12 + n])
        pos += 16 + n
    return out


def spec_bytes(decoded, sequence):
    """The header bytes of fuzz_example_decoder.cc for specs matching one decoded record."""
    maps = [("context", 0), ("feature_lists", 0x80)] if sequence else [("features", 0)]
    specs = []
    for key, seq_bit in maps:
        for name, feature in (decoded.get(key) or {}).items():
            if name not in names or len(specs) == 7:
                continue
            if seq_bit:  # a feature list: its steps, as a VarLen of the first step's kind
                steps = feature if isinstance(feature, list) else []
                feature = steps[0] if steps else {"kind": "int64_list", "value": []}
            kind = {"int64_list": 0, "float_list": 1, "bytes_list": 2}.get(feature.get("kind"), 0)
            count = feature.get("count", len(feature.get("value") or []))
            layout = 0 if count < 64 and not seq_bit else 1
            specs.append(bytes([names.index(name) | kind << 4 | seq_bit, layout | (count & 63) << 2, 0]))
    return bytes([int(sequence) | len(specs) << 1]) + b"".join(specs)


n = 0
for path in sorted(corpus.rglob("*.tfrecord")):
    data = path.read_bytes()
    meta = json.loads(Path(str(path) + ".expected.json").read_text())
    comp = {"": 0, "GZIP": 1, "ZLIB": 2}[meta.get("compression_type", "")]
    # Defaults (memory source, 1 MiB buffer, no limits) on the first 256 KiB and a harsh shape
    # (short reads, a 4103-byte buffer, batches of 2 records / 100 bytes) on the first 16 KiB:
    # runs over thousands of records are slow, and a cut file is as good a seed as a whole one.
    for control, cut in ((bytes([comp, 0x1f]), 256 << 10), (bytes([comp | 0xa0, 0x0d]), 16 << 10)):
        (Path(seeds) / "fuzz_record_reader" / f"{path.stem}-{control.hex()}").write_bytes(
            control + data[:cut])
        n += 1
    if path.parent.name not in ("example", "sequence") or comp:
        continue
    sequence = path.parent.name == "sequence"
    decoded = meta.get("decoded_first_records") or []
    payloads = records(data)
    for i, payload in enumerate(payloads[:len(decoded)]):
        seed = spec_bytes(decoded[i], sequence) + payload
        if len(seed) <= MAX_DECODER:
            (Path(seeds) / "fuzz_example_decoder" / f"{path.stem}-{i}").write_bytes(seed)
            n += 1
    if decoded:
        seed = spec_bytes(decoded[0], sequence) + SEPARATOR.join(payloads[:5])
        (Path(seeds) / "fuzz_example_decoder" / f"{path.stem}-run").write_bytes(seed[:MAX_DECODER])
        n += 1
print(f"fuzz.sh: {n} seeds from {corpus}")
PY

# 4. Fuzz, both targets at once. Findings land in $BUILD/findings/<target>-* (this run's only).
FINDINGS="$BUILD/findings"
rm -rf "$FINDINGS" && mkdir -p "$FINDINGS" "$BUILD/logs"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:symbolize=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
pids=()
for t in "${TARGETS[@]}"; do
  mkdir -p "$BUILD/corpus/$t"
  "$BUILD/$t" "$BUILD/corpus/$t" "$SEEDS/$t" -max_total_time="$SECONDS_EACH" \
    -max_len="${MAX_LEN[$t]}" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$FINDINGS/$t-" >"$BUILD/logs/$t.log" 2>&1 &
  pids+=($!)
done
rcs=()
for pid in "${pids[@]}"; do
  if wait "$pid"; then rcs+=(0); else rcs+=($?); fi
done

# 5. Summary: runs and coverage of each target, and where any finding is.
echo "================ fuzz.sh summary (${SECONDS_EACH}s per target) ================"
fail=0
for i in "${!TARGETS[@]}"; do
  t="${TARGETS[$i]}" log="$BUILD/logs/$t.log"
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1 || true)"
  last="$(grep -E '^#[0-9]+' "$log" | tail -n1 || true)"
  cov="$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*' <<<"$last" || true)"
  speed="$(grep -oE 'exec/s: [0-9]+' <<<"$last" || true)"
  printf '%-22s runs %s  %s  %s  (exit %s)\n' "$t" "${runs:-?}" "${cov:-cov: ?}" "${speed:-exec/s: ?}" \
    "${rcs[$i]}"
  shopt -s nullglob
  found=("$FINDINGS/$t-"*)
  shopt -u nullglob
  if (( rcs[i] != 0 || ${#found[@]} )); then
    fail=1
    echo "---- $t: FINDING (log: $log)"
    grep -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|SUMMARY:|fuzz_[a-z_]+: ' \
      "$log" | head -n 20 || true
    grep -E '^ +#[0-9]+ .* in (tfr::|LLVMFuzzerTestOneInput)' "$log" | head -n 8 || true
    for f in "${found[@]}"; do echo "     input: $f   (reproduce: $BUILD/$t $f)"; done
  fi
done
if (( fail )); then echo "RESULT: FINDINGS"; exit 1; fi
echo "RESULT: clean"
