// Decodes serialized tf.train.Example records straight into columns, one per requested feature.
// No protobuf library and no per-record allocation beyond the growing column buffers.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "byte_buffer.h"

namespace tfr {

enum class ValueKind { kInt64, kFloat, kBytes };

// How one requested feature lands in its column.
enum class Layout {
  kFixed,     // exactly `count` values per record (numeric: values; bytes: starts/ends)
  kVar,       // any number of values per record, plus row_splits
  kRawBytes,  // one bytes value of exactly `count` bytes per record, copied into values
};

struct FieldSpec {
  std::string name;
  ValueKind kind = ValueKind::kInt64;
  Layout layout = Layout::kVar;
  size_t count = 0;
  bool has_default = false;
  std::vector<uint8_t> default_value;  // raw values (kFixed numeric) or bytes (kRawBytes)
  // A SequenceExample feature list: the layout then applies to each step (kFixed or kVar).
  bool sequence = false;
  // kVar: a record without the feature is an error (otherwise it has no values).
  bool required = false;
};

// Output of one FieldSpec over a batch of records.
struct Column {
  ByteBuffer values;                 // numeric values (int64 / float32) or raw decoded bytes
  std::vector<int64_t> starts;       // bytes values: [starts[j], ends[j]) in the records' buffer,
                                     // or -1 for a missing feature's default
  std::vector<int64_t> ends;
  std::vector<int64_t> row_splits;   // kVar: values of record i are [row_splits[i], row_splits[i+1])
                                     // (for sequences: the steps of record i)
  std::vector<int64_t> step_splits;  // sequence kVar: values of step j are [step_splits[j], ...[j+1])
  std::vector<uint8_t> present;      // kVar: 1 where record i holds the feature (missing is not
                                     // an empty list, for callers such as Arrow's nulls)
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
  bool has_feature;     // false when the record as a whole is malformed
  std::string feature;
  std::string source;   // the records' file, when the caller knows it
};

// Parses records data[offsets[i], offsets[i+1]) for i < n: tf.train.Example records, or
// tf.train.SequenceExample ones when `sequence_examples` (then specs without `sequence` read the
// context). Bytes values are reported as offsets into `data`, so the caller can hand them out
// without copying.
std::vector<Column> decode_examples(const uint8_t* data, const int64_t* offsets, size_t n,
                                    const std::vector<FieldSpec>& specs, bool sequence_examples);

// One feature a record holds: its name and the kind of its list (kNone for a Feature that holds
// no list at all).
struct FeatureKind {
  std::string name;
  int kind;             // a ValueKind, or kNoList
  size_t first_record;  // the first record that holds it
  static constexpr int kNoList = -1;
};

// The features the records data[offsets[i], offsets[i+1]) hold (their Example features, or their
// SequenceExample context), without a spec: every name once, in the order first seen, with the
// first list kind any record shows for it. A record that is not a valid message throws
// ParseError when `strict`; otherwise the scan stops before it (decode_examples then reports the
// first damaged record). What lets a spec-free reader use decode_examples.
std::vector<FeatureKind> feature_kinds(const uint8_t* data, const int64_t* offsets, size_t n,
                                       bool sequence_examples, bool strict);

}  // namespace tfr
