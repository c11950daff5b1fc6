// The vocabulary the tf.train.Example encoder and decoder share: the kinds of a Feature's values,
// how a requested feature lands in its column, and columns of values over N records.
//
// A column holds one feature of N records, the way Arrow and the Python layer (Ragged,
// BytesColumn) hold lists: all values back to back, and row_splits saying which values each
// record holds. The decoder writes Column (it owns its buffers; bytes values stay in the records
// and are given as [starts, ends) in them); the encoder reads ColumnView (memory its caller keeps
// alive; bytes values as BytesRefs, so they may live in one buffer or in many objects).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "byte_buffer.h"

namespace tfr {

// The kind of a Feature's values. The numbers are the field numbers of the Feature oneof
// (tensorflow/core/example/feature.proto), so the wire tag and the kind convert directly.
enum class Kind : uint8_t {
  kBytes = 1,    // BytesList
  kFloat = 2,    // FloatList (float32)
  kInt64 = 3,    // Int64List
  kFeature = 4,  // encoder input only: each row is one serialized Feature message, written as is
};

// "bytes", "float", "int64", "Feature": how error messages name a kind.
inline const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kBytes:
      return "bytes";
    case Kind::kFloat:
      return "float";
    case Kind::kInt64:
      return "int64";
    case Kind::kFeature:
      return "Feature";
  }
  return "unknown";
}

// How one requested feature lands in its decoded column.
enum class Layout : uint8_t {
  kFixed,     // exactly `count` values per record (numeric: values; bytes: starts/ends)
  kVar,       // any number of values per record, plus row_splits
  kRawBytes,  // one bytes value of exactly `count` bytes per record, copied into values
};

// The decoder's output for one requested feature over a batch of records (see FieldSpec).
struct Column {
  ByteBuffer values;            // numeric values (int64 / float32) or raw decoded bytes
  std::vector<int64_t> starts;  // bytes values: [starts[j], ends[j]) in the records' buffer,
                                // or -1 for a missing feature's default
  std::vector<int64_t> ends;
  std::vector<int64_t> row_splits;  // kVar: values of record i are [row_splits[i], row_splits[i+1])
                                    // (for sequences: the steps of record i)
  std::vector<int64_t>
      step_splits;               // sequence kVar: values of step j are [step_splits[j], ...[j+1])
  std::vector<uint8_t> present;  // kVar: 1 where record i holds the feature (missing is not
                                 // an empty list, for callers such as Arrow's nulls)
};

// One bytes value held elsewhere.
struct BytesRef {
  const uint8_t* data;
  size_t size;
};

// A read-only array the caller keeps alive and unchanged while it is in use.
template <typename T>
struct Span {
  const T* data = nullptr;
  size_t size = 0;

  const T& operator[](size_t i) const { return data[i]; }
  bool empty() const { return size == 0; }
};

// The encoder's input for one feature over N rows (a row becomes one record's Feature). The
// values of row i are [begin(i), end(i)) of the array of the column's kind:
//   row_splits given (N + 1 entries): [row_splits[i], row_splits[i + 1])
//   otherwise:                        value i alone (one value per row)
// kInt64 reads int64s, kFloat floats, kBytes and kFeature bytes (wherever each value lives: in one
// buffer, as Arrow and the decoder keep them, or in separate objects). With `present` (N flags), a
// row whose flag is 0 leaves the feature out of its record; its values are neither checked nor
// read.
struct ColumnView {
  std::string name;  // the feature key (any bytes; UTF-8 from Python)
  Kind kind = Kind::kInt64;
  Span<int64_t> int64s;
  Span<float> floats;
  Span<BytesRef> bytes;
  Span<int64_t> row_splits;
  Span<uint8_t> present;

  size_t num_values() const {  // in the array of the column's kind
    switch (kind) {
      case Kind::kInt64:
        return int64s.size;
      case Kind::kFloat:
        return floats.size;
      case Kind::kBytes:
      case Kind::kFeature:
        return bytes.size;
    }
    return 0;
  }
  size_t num_rows() const { return row_splits.empty() ? num_values() : row_splits.size - 1; }
  size_t begin(size_t row) const { return row_splits.empty() ? row : size_t(row_splits[row]); }
  size_t end(size_t row) const {
    return row_splits.empty() ? row + 1 : size_t(row_splits[row + 1]);
  }
  bool has(size_t row) const { return present.empty() || present[row] != 0; }
};

}  // namespace tfr
