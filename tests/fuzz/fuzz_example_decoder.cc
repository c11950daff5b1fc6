// libFuzzer target: the tf.train.Example / SequenceExample decoder (decode_examples) with specs
// derived from the input.
//
// Input: a header, then the records.
//   byte 0            bit 0: SequenceExample mode; bits 1-3: number of specs (0..7)
//   3 bytes per spec  a: bits 0-3 name (kNames), bits 4-5 kind (int64, float, bytes, bytes),
//                        bit 6 has a default, bit 7 a feature list (SequenceExample mode only)
//                     b: bits 0-1 layout (fixed, var, raw bytes, var), bits 2-7 count (0..63)
//                     c: the byte the default is filled with
//   the rest          records, separated by kSeparator
// Specs keep the rules the Python layer keeps (raw bytes only for bytes context features, no
// default on feature lists, defaults of the right size, no name twice in one map).
//
// The decoder may throw tfr::ParseError; anything else escaping, or columns that break their
// documented shape, aborts: a finding. Records are decoded as one batch (the hints carry over
// from record to record), then again in parts on the task pool (3 threads: the same columns or
// the same error), and then each on its own, in a buffer of exactly its size so that
// AddressSanitizer sees a read past its end.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "example_decoder.h"

namespace {

// Names of the conformance corpus (so seeds match), of every length class the decoder's name
// comparison treats differently (empty, < 8, 8..16, > 16 bytes).
const char* const kNames[16] = {
    "",         "f",        "w",         "id",          "ids",        "label",
    "index",    "tokens",   "words",     "embeddings",  "image_raw",  "feature0",
    "feature1", "feature3", "ints_100k", "image/object/bbox/xmin",
};
const uint8_t kSeparator[4] = {0xfe, 'R', 'E', 'C'};

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_example_decoder: %s\n", what);
  std::abort();
}
#define CHECK(cond) \
  do {              \
    if (!(cond)) finding("check failed: " #cond); \
  } while (0)

size_t value_size(tfr::Kind kind) { return kind == tfr::Kind::kInt64 ? 8 : 4; }

// The shape each column must have after decoding n records of `records` (a buffer of `total`
// bytes).
void check_columns(const std::vector<tfr::Column>& columns, const std::vector<tfr::FieldSpec>& specs,
                   size_t n, size_t total) {
  CHECK(columns.size() == specs.size());
  for (size_t k = 0; k < specs.size(); ++k) {
    const tfr::FieldSpec& s = specs[k];
    const tfr::Column& c = columns[k];
    const bool bytes = s.kind == tfr::Kind::kBytes && s.layout != tfr::Layout::kRawBytes;
    CHECK(c.starts.size() == c.ends.size());
    for (size_t j = 0; j < c.starts.size(); ++j) {
      if (c.starts[j] == -1) {
        CHECK(c.ends[j] == -1 && s.has_default);
        continue;
      }
      CHECK(0 <= c.starts[j] && c.starts[j] <= c.ends[j] && uint64_t(c.ends[j]) <= total);
    }
    const size_t values = bytes ? c.starts.size() : c.values.size() / value_size(s.kind);
    if (!bytes && s.layout != tfr::Layout::kRawBytes) CHECK(c.values.size() % value_size(s.kind) == 0);
    if (!bytes) CHECK(c.starts.empty());
    if (s.layout == tfr::Layout::kVar || s.sequence) {
      CHECK(c.row_splits.size() == n + 1 && c.row_splits[0] == 0);
      CHECK(std::is_sorted(c.row_splits.begin(), c.row_splits.end()));
    } else {
      CHECK(c.row_splits.empty());
    }
    if (s.sequence && s.layout == tfr::Layout::kVar) {  // row_splits count steps
      CHECK(c.step_splits.size() == size_t(c.row_splits.back()) + 1 && c.step_splits[0] == 0);
      CHECK(std::is_sorted(c.step_splits.begin(), c.step_splits.end()));
      CHECK(uint64_t(c.step_splits.back()) == values);
    } else {
      CHECK(c.step_splits.empty());
    }
    if (s.sequence && s.layout == tfr::Layout::kFixed) {
      CHECK(values == size_t(c.row_splits.back()) * s.count);
    } else if (!s.sequence && s.layout == tfr::Layout::kVar) {
      CHECK(uint64_t(c.row_splits.back()) == values);
    } else if (s.layout == tfr::Layout::kFixed) {
      CHECK(values == n * s.count);
    } else if (s.layout == tfr::Layout::kRawBytes) {
      CHECK(c.values.size() == n * s.count);
    }
  }
}

bool same_columns(const std::vector<tfr::Column>& a, const std::vector<tfr::Column>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k) {
    const tfr::Column& x = a[k];
    const tfr::Column& y = b[k];
    if (x.values.size() != y.values.size() ||
        (x.values.size() != 0 && std::memcmp(x.values.data(), y.values.data(), x.values.size()) != 0) ||
        x.starts != y.starts || x.ends != y.ends || x.row_splits != y.row_splits ||
        x.step_splits != y.step_splits || x.present != y.present) {
      return false;
    }
  }
  return true;
}

// Decodes the batch with num_threads; returns whether it failed, and where.
bool decode_with(const uint8_t* data, const std::vector<int64_t>& offsets,
                 const std::vector<tfr::FieldSpec>& specs, bool sequences, size_t num_threads,
                 std::vector<tfr::Column>* columns, size_t* failed_at) {
  const size_t n = offsets.size() - 1;
  try {
    *columns = tfr::decode_examples(data, offsets.data(), n, specs, sequences, num_threads);
    check_columns(*columns, specs, n, size_t(offsets.back()));
    return false;
  } catch (const tfr::ParseError& e) {
    CHECK(e.record_index < n);
    CHECK(!e.has_feature || std::any_of(specs.begin(), specs.end(),
                                        [&](const tfr::FieldSpec& s) { return s.name == e.feature; }));
    *failed_at = e.record_index;
    return true;
  }
}

void decode(const uint8_t* data, const std::vector<int64_t>& offsets,
            const std::vector<tfr::FieldSpec>& specs, bool sequences, bool in_parts) {
  std::vector<tfr::Column> one, parts;
  size_t one_failed_at = 0, parts_failed_at = 0;
  const bool one_failed = decode_with(data, offsets, specs, sequences, 1, &one, &one_failed_at);
  if (!in_parts) return;
  const bool parts_failed =
      decode_with(data, offsets, specs, sequences, 3, &parts, &parts_failed_at);
  CHECK(one_failed == parts_failed);
  if (one_failed) {
    CHECK(one_failed_at == parts_failed_at);  // the first record that fails, as with one thread
  } else {
    CHECK(same_columns(one, parts));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool sequences = (data[0] & 1) != 0;
  const size_t nspecs = (data[0] >> 1) & 7;
  size_t pos = 1;
  std::vector<tfr::FieldSpec> specs;
  for (size_t i = 0; i < nspecs && pos + 3 <= size; ++i, pos += 3) {
    const uint8_t a = data[pos], b = data[pos + 1], fill = data[pos + 2];
    tfr::FieldSpec s;
    s.name = kNames[a & 15];
    s.kind = (a >> 4 & 3) == 0 ? tfr::Kind::kInt64
             : (a >> 4 & 3) == 1 ? tfr::Kind::kFloat : tfr::Kind::kBytes;
    s.sequence = sequences && (a & 0x80) != 0;
    s.layout = (b & 3) == 0 ? tfr::Layout::kFixed
               : (b & 3) == 2 ? tfr::Layout::kRawBytes : tfr::Layout::kVar;
    s.count = b >> 2;
    if (s.layout == tfr::Layout::kVar) s.count = 0;
    if (s.layout == tfr::Layout::kRawBytes) {
      if (s.sequence) s.layout = tfr::Layout::kVar, s.count = 0;
      s.kind = tfr::Kind::kBytes;
    }
    if ((a & 0x40) != 0 && !s.sequence && s.layout != tfr::Layout::kVar) {
      s.has_default = true;
      const size_t bytes = s.layout == tfr::Layout::kFixed && s.kind != tfr::Kind::kBytes
                               ? s.count * value_size(s.kind) : s.count;
      s.default_value.assign(bytes, fill);
    }
    const bool taken = std::any_of(specs.begin(), specs.end(), [&](const tfr::FieldSpec& t) {
      return t.name == s.name && t.sequence == s.sequence;
    });
    if (!taken) specs.push_back(std::move(s));
  }
  if (pos > size) pos = size;

  // Split the rest into records.
  std::vector<int64_t> offsets{0};
  std::vector<std::pair<size_t, size_t>> spans;  // (start, end) in the input
  const uint8_t* body = data + pos;
  const size_t body_size = size - pos;
  std::vector<uint8_t> joined;
  joined.reserve(body_size);
  size_t start = 0;
  for (size_t i = 0; i <= body_size; ++i) {
    const bool at_sep = i + sizeof kSeparator <= body_size &&
                        std::memcmp(body + i, kSeparator, sizeof kSeparator) == 0;
    if (i == body_size || at_sep) {
      spans.emplace_back(start, i);
      joined.insert(joined.end(), body + start, body + i);
      offsets.push_back(int64_t(joined.size()));
      if (at_sep) i += sizeof kSeparator - 1;
      start = i + 1;
    }
  }

  // One batch in one exactly-sized buffer, then each record alone.
  {
    std::vector<uint8_t> batch(joined);  // its own allocation, no spare capacity
    decode(batch.data(), offsets, specs, sequences, true);
  }
  for (const auto& [b, e] : spans) {
    std::unique_ptr<uint8_t[]> one(new uint8_t[std::max<size_t>(e - b, 1)]);
    std::memcpy(one.get(), body + b, e - b);
    decode(one.get(), {0, int64_t(e - b)}, specs, sequences, false);
  }
  return 0;
}
