// Writes tf.train.Example messages in protobuf wire format, from columns held by the caller.
//
// Wire layout written (field numbers from tensorflow/core/example/{example,feature}.proto):
//   Example   { Features features = 1 }                       0x0a len Features  (always present)
//   Features  { map<string, Feature> feature = 1 }            per entry: 0x0a len Entry
//   Entry     { string key = 1; Feature value = 2 }           0x0a len key 0x12 len Feature
//   Feature   { oneof { BytesList = 1; FloatList = 2; Int64List = 3 } }   tag len List
//   BytesList { repeated bytes value = 1 }                    per value: 0x0a len bytes
//   FloatList { repeated float value = 1 [packed] }           0x0a len fixed32... (nothing if
//   empty) Int64List { repeated int64 value = 1 [packed] }           0x0a len varint...  (nothing
//   if empty)
// This is exactly what protobuf's SerializeToString writes for the same message (entries in the
// order given), so the bytes are identical to protobuf's whenever its entry order is the same.
//
// No Python in here. Every function checks its columns first (validate) and throws
// std::invalid_argument naming the feature and row; then every size is computed before anything
// is written: one allocation per batch, no reallocation while writing. The columns are read
// twice (sizes, then bytes), so their memory must not change during a call. Pure computation:
// call without the GIL.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "example_columns.h"
#include "record_batch.h"

namespace tfr {

// Throws std::invalid_argument unless the column has num_rows rows, each present row within the
// values (0 <= begin <= end <= number of values), `present` empty or num_rows flags, and each
// present kFeature row holding exactly one value. (Bytes values are whole BytesRefs: their
// maker checks them against their buffer.)
void validate(const ColumnView& column, size_t num_rows);

// Encodes one Example per row: record i holds row i of columns[0], columns[1], ... in that order
// (a column whose row is not present is left out). Appends to `out` (data + offsets + positions;
// positions are where each record's header would start in a TFRecord file written from this
// batch alone).
void encode_examples(const std::vector<ColumnView>& columns, size_t num_rows, RecordBatch& out);

// One feature list of a SequenceExample over N records: `steps` has one row per step (all
// records' steps back to back; no `present`); record i's steps are rows [splits[i], splits[i + 1]).
struct FeatureListView {
  ColumnView steps;
  size_t num_steps = 0;
  Span<int64_t> splits;  // N + 1 entries
};

// Encodes one tf.train.SequenceExample per record:
//   SequenceExample { Features context = 1; FeatureLists feature_lists = 2 }   (both written)
//   FeatureLists    { map<string, FeatureList> feature_list = 1 }
//   FeatureList     { repeated Feature feature = 1 }
// context row i as in encode_examples, then the lists in the order given.
void encode_sequence_examples(const std::vector<ColumnView>& context,
                              const std::vector<FeatureListView>& lists, size_t num_rows,
                              RecordBatch& out);

// Encodes row i of `column` (no `present`) as one tf.train.Feature message, appended to `out` as
// record i: how rows of different kinds become one kFeature column.
void encode_features(const ColumnView& column, size_t num_rows, RecordBatch& out);

// One Example from columns of one row, in two steps so the caller can allocate the destination
// (e.g. a Python bytes object) exactly: example_size() validates and fills `scratch`, which
// write_example() then reuses; it writes exactly the returned number of bytes at `dst`.
size_t example_size(const std::vector<ColumnView>& columns, std::vector<uint64_t>& scratch);
void write_example(const std::vector<ColumnView>& columns, const std::vector<uint64_t>& scratch,
                   uint8_t* dst);

}  // namespace tfr
