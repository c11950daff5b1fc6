// Writes tf.train.Example messages in protobuf wire format, from columns held by the caller.
//
// Wire layout written (field numbers from tensorflow/core/example/{example,feature}.proto):
//   Example   { Features features = 1 }                       0x0a len Features  (always present)
//   Features  { map<string, Feature> feature = 1 }            per entry: 0x0a len Entry
//   Entry     { string key = 1; Feature value = 2 }           0x0a len key 0x12 len Feature
//   Feature   { oneof { BytesList = 1; FloatList = 2; Int64List = 3 } }   tag len List
//   BytesList { repeated bytes value = 1 }                    per value: 0x0a len bytes
//   FloatList { repeated float value = 1 [packed] }           0x0a len fixed32... (nothing if empty)
//   Int64List { repeated int64 value = 1 [packed] }           0x0a len varint...  (nothing if empty)
// This is exactly what protobuf's SerializeToString writes for the same message (entries in the
// order given), so the bytes are identical to protobuf's whenever its entry order is the same.
//
// No Python in here. Every size is computed before anything is written: one allocation per batch,
// no reallocation while writing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "record_reader.h"

namespace tfr::example {

// The value kind of one feature in one row. The numbers are the Feature oneof's field numbers.
enum class Kind : uint8_t {
  kBytes = 1,
  kFloat = 2,
  kInt64 = 3,
  kFeature = 4,  // one already serialized Feature message, embedded as is (a row holds exactly 1)
};

struct BytesRef {
  const uint8_t* data;
  size_t size;
};

// One feature over N rows; all pointers are borrowed and must outlive the encoding call.
// Row i holds the values [begin(i), end(i)) of the array for the row's kind:
//   begins != nullptr: begin = begins[i], end = ends[i]   (row splits s: begins = s, ends = s + 1)
//   otherwise:         begin = i * row_size, end = begin + row_size
// The row's kind is kinds[i] when kinds != nullptr, else `kind`.
// kBytes and kFeature rows index `bytes`; kFloat `floats`; kInt64 `int64s`.
// present != nullptr: a row with present[i] == 0 leaves the feature out of its record (a missing
// feature, not an empty list); its bounds are neither checked nor read.
struct Column {
  std::string name;  // the feature key (any bytes; UTF-8 from Python)
  Kind kind = Kind::kInt64;
  const Kind* kinds = nullptr;
  const int64_t* int64s = nullptr;
  size_t num_int64s = 0;
  const float* floats = nullptr;
  size_t num_floats = 0;
  const BytesRef* bytes = nullptr;
  size_t num_bytes = 0;
  size_t row_size = 0;
  const int64_t* begins = nullptr;
  const int64_t* ends = nullptr;
  const uint8_t* present = nullptr;

  bool has(size_t i) const { return present == nullptr || present[i] != 0; }
  Kind row_kind(size_t i) const { return kinds ? kinds[i] : kind; }
  size_t begin(size_t i) const { return begins ? size_t(begins[i]) : i * row_size; }
  size_t end(size_t i) const { return begins ? size_t(ends[i]) : (i + 1) * row_size; }
};

// Throws std::invalid_argument (naming the feature) unless every row of every column lies within
// its value array and kFeature rows hold exactly one value.
void validate(const std::vector<Column>& columns, size_t num_rows);

// Encodes one Example per row: row i is columns[0..] row i, in column order. Appends to `out`
// (data + offsets + positions; positions are where each record's header would start in a
// TFRecord file written from this batch alone). Pure computation: call without the GIL.
void encode_examples(const std::vector<Column>& columns, size_t num_rows, RecordBatch& out);

// One feature list of a SequenceExample over N records: `steps` has one row per step (all
// records' steps back to back); record i's steps are rows [splits[i], splits[i + 1]).
struct FeatureListColumn {
  Column steps;
  const int64_t* splits = nullptr;  // N + 1 entries, non-decreasing, within the steps' rows
  size_t num_steps = 0;
};

// Encodes one tf.train.SequenceExample per record:
//   SequenceExample { Features context = 1; FeatureLists feature_lists = 2 }   (both written)
//   FeatureLists    { map<string, FeatureList> feature_list = 1 }
//   FeatureList     { repeated Feature feature = 1 }
// context row i as in encode_examples, then the lists in the order given. Throws
// std::invalid_argument for bad bounds, or for steps with `present` (a step cannot be left out).
// Pure computation: call without the GIL.
void encode_sequence_examples(const std::vector<Column>& context,
                              const std::vector<FeatureListColumn>& lists, size_t num_rows,
                              RecordBatch& out);

// Single-example path, in two steps so the caller can allocate the destination (e.g. a Python
// bytes object) exactly: example_size() fills `scratch` which write_example() then reuses.
// write_example writes exactly the returned number of bytes at `dst`.
size_t example_size(const std::vector<Column>& columns, size_t row, std::vector<uint64_t>& scratch);
void write_example(const std::vector<Column>& columns, size_t row,
                   const std::vector<uint64_t>& scratch, uint8_t* dst);

}  // namespace tfr::example
