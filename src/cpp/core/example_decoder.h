// Decodes serialized tf.train.Example records straight into columns, one per requested feature.
// No protobuf library and no per-record allocation beyond the growing column buffers.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "buffer_pool.h"
#include "example_columns.h"

namespace tfr {

// One requested feature: which kind of list it must hold and how it lands in its Column.
struct FieldSpec {
  std::string name;
  Kind kind = Kind::kInt64;  // kBytes, kFloat or kInt64 (kRawBytes reads a kBytes value)
  Layout layout = Layout::kVar;
  size_t count = 0;
  bool has_default = false;
  std::vector<uint8_t> default_value;  // kFixed numeric: count raw values; kRawBytes: count bytes
  // A SequenceExample feature list: the layout then applies to each step (kFixed or kVar).
  bool sequence = false;
  // kVar: a record without the feature is an error (otherwise it has no values).
  bool required = false;
};

// A record that is not a valid Example, lacks a required feature, or has the wrong type or size.
class ParseError : public std::runtime_error {
 public:
  ParseError(size_t index, bool about_feature, std::string feature_name, const std::string& what)
      : std::runtime_error(what),
        record_index(index),
        has_feature(about_feature),
        feature(std::move(feature_name)) {}
  size_t record_index;
  bool has_feature;  // false when the record as a whole is malformed
  std::string feature;
  std::string source;  // the records' file, when the caller knows it
};

// Parses records data[offsets[i], offsets[i+1]) for i < n (offsets never decreasing; nothing is
// read outside data[offsets[0], offsets[n])): tf.train.Example records, or
// tf.train.SequenceExample ones when `sequence_examples` (then specs without `sequence` read the
// context). Bytes values are reported as offsets into `data`, so the caller can hand them out
// without copying. Throws std::invalid_argument for a spec no record could satisfy (a kind that
// is no list, a default of the wrong size).
//
// With num_threads > 1 the batch is cut into contiguous parts decoded in parallel on the
// process's task pool (task_pool.h), the calling thread among them, and joined in record order:
// the columns are the same as with one thread, and so is the error (that of the first record
// that fails).
//
// With a `pool`, the values of a fixed-size column of at least kPooledColumnBytes take a kept
// buffer from it: a large column in fresh memory costs more in page faults than decoding it
// (bench/RESULTS.md, #12). Its old bytes never show: every record's slot is written (its value
// or its default) or the call throws.
//
// Records that repeat the byte layout of the records before them are decoded by that layout
// (record_layout.h), the others by the general paths, with the same result; `learn_layouts`
// false decodes every record by the general paths (for tests and fuzzing, which compare both).
std::vector<Column> decode_examples(const uint8_t* data, const int64_t* offsets, size_t n,
                                    const std::vector<FieldSpec>& specs, bool sequence_examples,
                                    size_t num_threads = 1, BufferPool* pool = nullptr,
                                    bool learn_layouts = true);

constexpr size_t kPooledColumnBytes = size_t(1) << 20;

// Whether a spec's values are written into preallocated slots (FixedLen numbers and raw bytes,
// outside sequences): the only values decode_examples takes from a pool.
inline bool pooled_values(const FieldSpec& s) {
  return !s.sequence &&
         (s.layout == Layout::kRawBytes || (s.layout == Layout::kFixed && s.kind != Kind::kBytes));
}

// The fewest records for which a column of these specs takes a pooled buffer (SIZE_MAX: never),
// so that a caller need not find the pool for a batch too small to use it.
size_t records_for_pooled_column(const std::vector<FieldSpec>& specs);

// How many threads decode_examples is worth for n records of `bytes` bytes in all (before
// counting the cores): 1 below the size where starting threads costs more than they save.
size_t decode_threads_worth(size_t n, size_t bytes);

// One feature a record holds: its name and the kind of its list (none for a Feature that holds
// no list at all).
struct FeatureKind {
  std::string name;
  std::optional<Kind> kind;
  size_t first_record;  // the first record that holds it
};

// The features the records data[offsets[i], offsets[i+1]) hold (their Example features, or their
// SequenceExample context), without a spec: every name once, in the order first seen, with the
// first list kind any record shows for it. A record that is not a valid message throws
// ParseError when `strict`; otherwise the scan stops before it (decode_examples then reports the
// first damaged record). What lets a spec-free reader use decode_examples.
std::vector<FeatureKind> feature_kinds(const uint8_t* data, const int64_t* offsets, size_t n,
                                       bool sequence_examples, bool strict);

}  // namespace tfr
