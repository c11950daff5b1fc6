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
// documented shape, aborts: a finding. The records are decoded as one batch (where the layout
// learned from the first records takes the next ones: the fast path), then as one batch by the
// general paths only (learn_layouts false): the same columns, or the same error. Unless
// TFREC_FUZZ_DECODER=fast, the batch is also decoded in parts on the task pool (3 threads: the
// same columns or the same error), and each record on its own, in a buffer of exactly its size
// so that AddressSanitizer sees a read past its end, whose values must be the batch's. The fast
// mode leaves those out (a decoder set up per record, and thread hand-offs, cost more than the
// decoding) and runs several times as many inputs a second.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "example_decoder.h"

namespace {

// Names of the conformance corpus (so seeds match), of every length class the decoder's name
// comparison treats differently (empty, < 8, 8..16, > 16 bytes).
const char* const kNames[16] = {
    "",         "f",          "w",         "id",
    "ids",      "label",      "index",     "tokens",
    "words",    "embeddings", "image_raw", "feature0",
    "feature1", "feature3",   "ints_100k", "image/object/bbox/xmin",
};
const uint8_t kSeparator[4] = {0xfe, 'R', 'E', 'C'};

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_example_decoder: %s\n", what);
  std::abort();
}
#define CHECK(cond)                               \
  do {                                            \
    if (!(cond)) finding("check failed: " #cond); \
  } while (0)

size_t value_size(tfr::Kind kind) { return kind == tfr::Kind::kInt64 ? 8 : 4; }

// The shape each column must have after decoding n records of `records` (a buffer of `total`
// bytes).
void check_columns(const std::vector<tfr::Column>& columns,
                   const std::vector<tfr::FieldSpec>& specs, size_t n, size_t total) {
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
    if (!bytes && s.layout != tfr::Layout::kRawBytes)
      CHECK(c.values.size() % value_size(s.kind) == 0);
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
        (x.values.size() != 0 &&
         std::memcmp(x.values.data(), y.values.data(), x.values.size()) != 0) ||
        x.starts != y.starts || x.ends != y.ends || x.row_splits != y.row_splits ||
        x.step_splits != y.step_splits || x.present != y.present) {
      return false;
    }
  }
  return true;
}

// What record i holds for spec k, as one string (numbers as their bytes, bytes values spelled
// out with their lengths, a default or a missing VarLen marked), from columns of any batch over
// `data`.
std::string row_of(const std::vector<tfr::Column>& columns, const uint8_t* data,
                   const std::vector<tfr::FieldSpec>& specs, size_t k, size_t i) {
  const tfr::FieldSpec& s = specs[k];
  const tfr::Column& c = columns[k];
  const auto* bytes = reinterpret_cast<const char*>(data);
  auto bytes_value = [&](size_t j) {
    if (c.starts[j] < 0) return std::string("<default>");
    return std::to_string(c.ends[j] - c.starts[j]) + ":" +
           std::string(bytes + c.starts[j], size_t(c.ends[j] - c.starts[j]));
  };
  auto numbers = [&](size_t from, size_t to) {
    const size_t width = s.layout == tfr::Layout::kRawBytes ? 1 : value_size(s.kind);
    return std::string(reinterpret_cast<const char*>(c.values.data()) + from * width,
                       (to - from) * width);
  };
  std::string out;
  auto values = [&](size_t from, size_t to) {
    if (s.kind == tfr::Kind::kBytes && s.layout != tfr::Layout::kRawBytes) {
      for (size_t j = from; j < to; ++j) out += bytes_value(j) + ";";
    } else {
      out += numbers(from, to);
    }
  };
  if (s.sequence) {  // the record's steps, each its values
    for (int64_t step = c.row_splits[i]; step < c.row_splits[i + 1]; ++step) {
      if (s.layout == tfr::Layout::kVar) {
        values(size_t(c.step_splits[size_t(step)]), size_t(c.step_splits[size_t(step) + 1]));
      } else {
        values(size_t(step) * s.count, size_t(step + 1) * s.count);
      }
      out += "|";
    }
  } else if (s.layout == tfr::Layout::kVar) {
    out += c.present[i] ? "+" : "-";
    values(size_t(c.row_splits[i]), size_t(c.row_splits[i + 1]));
  } else {
    values(i * s.count, (i + 1) * s.count);
  }
  return out;
}

struct Outcome {
  std::vector<tfr::Column> columns;
  bool failed = false;
  size_t failed_at = 0;
  std::string feature, what;
};

Outcome decode_batch(const uint8_t* data, const std::vector<int64_t>& offsets, size_t n,
                     const std::vector<tfr::FieldSpec>& specs, bool sequences, size_t num_threads,
                     bool learn_layouts = true) {
  Outcome out;
  try {
    out.columns = tfr::decode_examples(data, offsets.data(), n, specs, sequences, num_threads,
                                       nullptr, learn_layouts);
    check_columns(out.columns, specs, n, size_t(offsets[n]));
  } catch (const tfr::ParseError& e) {
    CHECK(e.record_index < n);
    CHECK(!e.has_feature || std::any_of(specs.begin(), specs.end(), [&](const tfr::FieldSpec& s) {
      return s.name == e.feature;
    }));
    out.failed = true;
    out.failed_at = e.record_index;
    out.feature = e.feature;
    out.what = e.what();
  }
  return out;
}

// The batch by the general paths alone (no layout): the same columns, or the same error.
void decode_without_layouts(const uint8_t* data, const std::vector<int64_t>& offsets,
                            const std::vector<tfr::FieldSpec>& specs, bool sequences,
                            const Outcome& fast) {
  const Outcome general =
      decode_batch(data, offsets, offsets.size() - 1, specs, sequences, 1, false);
  CHECK(fast.failed == general.failed);
  if (fast.failed) {
    CHECK(fast.failed_at == general.failed_at);
    CHECK(fast.feature == general.feature);
    CHECK(fast.what == general.what);
  } else {
    CHECK(same_columns(fast.columns, general.columns));
  }
}

// The batch in parts on the task pool: the same columns as with one thread, or the same error.
void decode_in_parts(const uint8_t* data, const std::vector<int64_t>& offsets,
                     const std::vector<tfr::FieldSpec>& specs, bool sequences, const Outcome& one) {
  const Outcome parts = decode_batch(data, offsets, offsets.size() - 1, specs, sequences, 3);
  CHECK(one.failed == parts.failed);
  if (one.failed) {
    CHECK(one.failed_at == parts.failed_at);  // the first record that fails, as with one thread
  } else {
    CHECK(same_columns(one.columns, parts.columns));
  }
}

// Each record alone (the general paths) against the batch (the fast path where the layout takes
// a record): the same rows, and the batch's error at the first record that fails alone.
void compare_with_each_alone(const uint8_t* batch_data, const std::vector<int64_t>& offsets,
                             const std::vector<tfr::FieldSpec>& specs, bool sequences,
                             const Outcome& batch, const uint8_t* body,
                             const std::vector<std::pair<size_t, size_t>>& spans) {
  Outcome prefix;  // when the batch fails: the records before the failure, as a batch of their own
  const Outcome* rows = &batch;
  if (batch.failed) {
    prefix = decode_batch(batch_data, offsets, batch.failed_at, specs, sequences, 1);
    CHECK(!prefix.failed);  // (the first failure in the batch is the first of every prefix)
    rows = &prefix;
  }
  for (size_t i = 0; i < spans.size(); ++i) {
    const auto [b, e] = spans[i];
    std::unique_ptr<uint8_t[]> one(new uint8_t[std::max<size_t>(e - b, 1)]);
    std::memcpy(one.get(), body + b, e - b);
    const std::vector<int64_t> one_offsets{0, int64_t(e - b)};
    const Outcome alone = decode_batch(one.get(), one_offsets, 1, specs, sequences, 1);
    if (batch.failed && i > batch.failed_at) continue;  // past the batch's error: shapes only
    if (batch.failed && i == batch.failed_at) {
      CHECK(alone.failed);
      CHECK(alone.feature == batch.feature);
      CHECK(alone.what == batch.what);
      continue;
    }
    CHECK(!alone.failed);
    for (size_t k = 0; k < specs.size(); ++k) {
      CHECK(row_of(rows->columns, batch_data, specs, k, i) ==
            row_of(alone.columns, one.get(), specs, k, 0));
    }
  }
}

bool fast_mode() {
  static const bool fast = [] {
    const char* mode = std::getenv("TFREC_FUZZ_DECODER");
    return mode != nullptr && std::strcmp(mode, "fast") == 0;
  }();
  return fast;
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
    s.kind = (a >> 4 & 3) == 0   ? tfr::Kind::kInt64
             : (a >> 4 & 3) == 1 ? tfr::Kind::kFloat
                                 : tfr::Kind::kBytes;
    s.sequence = sequences && (a & 0x80) != 0;
    s.layout = (b & 3) == 0   ? tfr::Layout::kFixed
               : (b & 3) == 2 ? tfr::Layout::kRawBytes
                              : tfr::Layout::kVar;
    s.count = b >> 2;
    if (s.layout == tfr::Layout::kVar) s.count = 0;
    if (s.layout == tfr::Layout::kRawBytes) {
      if (s.sequence) s.layout = tfr::Layout::kVar, s.count = 0;
      s.kind = tfr::Kind::kBytes;
    }
    if ((a & 0x40) != 0 && !s.sequence && s.layout != tfr::Layout::kVar) {
      s.has_default = true;
      const size_t bytes = s.layout == tfr::Layout::kFixed && s.kind != tfr::Kind::kBytes
                               ? s.count * value_size(s.kind)
                               : s.count;
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
  std::vector<uint8_t> batch(joined);  // its own allocation, no spare capacity
  const Outcome one = decode_batch(batch.data(), offsets, spans.size(), specs, sequences, 1);
  decode_without_layouts(batch.data(), offsets, specs, sequences, one);
  if (fast_mode()) return 0;
  decode_in_parts(batch.data(), offsets, specs, sequences, one);
  compare_with_each_alone(batch.data(), offsets, specs, sequences, one, body, spans);
  return 0;
}
