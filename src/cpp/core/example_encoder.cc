#include "example_encoder.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "protobuf_wire.h"
#include "record_format.h"

namespace tfr {
namespace {

// Every field written is length-delimited (packed lists included); its tag fits one byte.
constexpr uint8_t tag(uint32_t field) { return uint8_t(field << 3 | wire::kLengthDelimited); }
constexpr uint8_t kExampleFeaturesTag = tag(wire::kExampleFeatures);
constexpr uint8_t kEntryTag = tag(wire::kFeaturesEntry);
constexpr uint8_t kKeyTag = tag(wire::kMapKey);
constexpr uint8_t kValueTag = tag(wire::kMapValue);
constexpr uint8_t kListValueTag = tag(wire::kListValue);
constexpr uint8_t kFeatureListsTag = tag(wire::kSequenceFeatureLists);
constexpr uint8_t kStepTag = tag(wire::kFeatureListFeature);
static_assert(uint32_t(Kind::kBytes) == wire::kBytesList &&
                  uint32_t(Kind::kFloat) == wire::kFloatList &&
                  uint32_t(Kind::kInt64) == wire::kInt64List,
              "Kind values are the Feature.kind field numbers");

inline size_t varint_size(uint64_t v) {
  const int bits = bit_width64(v);
  return size_t((bits * 9 + 64) / 64);
}

inline uint8_t* put_varint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = uint8_t(v | 0x80);
    v >>= 7;
  }
  *p++ = uint8_t(v);
  return p;
}

// A length-delimited field holding `n` bytes: tag + length + n.
inline size_t field_size(uint64_t n) { return 1 + varint_size(n) + size_t(n); }

inline uint8_t* put_header(uint8_t* p, uint8_t tag, uint64_t n) {
  *p++ = tag;
  return put_varint(p, n);
}

inline uint8_t* put_bytes(uint8_t* p, const uint8_t* data, size_t n) {
  if (n) std::memcpy(p, data, n);
  return p + n;
}

// The row's list payload: the packed bytes of a numeric list, the repeated fields of a bytes
// list, the whole message of a serialized Feature. Everything else follows from it in O(1).
uint64_t payload_size(const ColumnView& c, size_t row) {
  if (!c.has(row)) return 0;
  const size_t b = c.begin(row), e = c.end(row);
  switch (c.kind) {
    case Kind::kInt64: {
      uint64_t n = 0;
      for (size_t k = b; k < e; ++k) n += varint_size(uint64_t(c.int64s[k]));
      return n;
    }
    case Kind::kFloat:
      return uint64_t(e - b) * 4;
    case Kind::kBytes: {
      uint64_t n = 0;
      for (size_t k = b; k < e; ++k) n += field_size(c.bytes[k].size);
      return n;
    }
    case Kind::kFeature:
      return c.bytes[b].size;
  }
  return 0;
}

// The list message inside the Feature (packed numeric lists omit the field when empty).
inline uint64_t list_size(Kind kind, uint64_t payload) {
  if (kind == Kind::kBytes) return payload;
  return payload ? field_size(payload) : 0;
}

inline uint64_t feature_size(Kind kind, uint64_t payload) {
  return kind == Kind::kFeature ? payload : field_size(list_size(kind, payload));
}

inline uint64_t entry_size(const std::string& name, uint64_t feature) {
  return field_size(name.size()) + field_size(feature);
}

// The Features message of one row, from its payload sizes.
uint64_t features_size(const std::vector<ColumnView>& columns, size_t row,
                       const uint64_t* payloads) {
  uint64_t n = 0;
  for (size_t f = 0; f < columns.size(); ++f) {
    const ColumnView& c = columns[f];
    if (c.has(row)) n += field_size(entry_size(c.name, feature_size(c.kind, payloads[f])));
  }
  return n;
}

uint8_t* put_list(const ColumnView& c, size_t row, uint64_t payload, uint8_t* p) {
  const size_t b = c.begin(row), e = c.end(row);
  switch (c.kind) {
    case Kind::kInt64:
      if (payload == 0) return p;
      p = put_header(p, kListValueTag, payload);
      for (size_t k = b; k < e; ++k) p = put_varint(p, uint64_t(c.int64s[k]));
      return p;
    case Kind::kFloat:
      if (payload == 0) return p;
      p = put_header(p, kListValueTag, payload);
#if !TFR_BIG_ENDIAN
      return put_bytes(p, reinterpret_cast<const uint8_t*>(c.floats.data + b), size_t(payload));
#else
      for (size_t k = b; k < e; ++k) {
        uint32_t bits;
        std::memcpy(&bits, c.floats.data + k, 4);
        for (int s = 0; s < 32; s += 8) *p++ = uint8_t(bits >> s);
      }
      return p;
#endif
    case Kind::kBytes:
      for (size_t k = b; k < e; ++k) {
        p = put_header(p, kListValueTag, c.bytes[k].size);
        p = put_bytes(p, c.bytes[k].data, c.bytes[k].size);
      }
      return p;
    case Kind::kFeature:
      break;
  }
  return p;
}

// The Feature message of a row: a serialized Feature as it is, else the list's tag + list.
uint8_t* put_feature(const ColumnView& c, size_t row, uint64_t payload, uint8_t* p) {
  if (c.kind == Kind::kFeature) {
    const BytesRef& v = c.bytes[c.begin(row)];
    return put_bytes(p, v.data, v.size);
  }
  p = put_header(p, tag(uint32_t(c.kind)), list_size(c.kind, payload));
  return put_list(c, row, payload, p);
}

uint8_t* put_example(const std::vector<ColumnView>& columns, size_t row, const uint64_t* payloads,
                     uint8_t* p) {
  p = put_header(p, kExampleFeaturesTag, features_size(columns, row, payloads));
  for (size_t f = 0; f < columns.size(); ++f) {
    const ColumnView& c = columns[f];
    if (!c.has(row)) continue;
    const uint64_t feature = feature_size(c.kind, payloads[f]);
    p = put_header(p, kEntryTag, entry_size(c.name, feature));
    p = put_header(p, kKeyTag, c.name.size());
    p = put_bytes(p, reinterpret_cast<const uint8_t*>(c.name.data()), c.name.size());
    p = put_header(p, kValueTag, feature);
    p = put_feature(c, row, payloads[f], p);
  }
  return p;
}

[[noreturn]] void fail(const ColumnView& c, const std::string& what) {
  throw std::invalid_argument("feature '" + c.name + "': " + what);
}

[[noreturn]] void fail(const ColumnView& c, size_t row, const std::string& what) {
  fail(c, "row " + std::to_string(row) + ": " + what);
}

// Appends one record per entry of `sizes` to `out`; put(i, p) writes record i at p.
template <typename Put>
void append_records(const std::vector<size_t>& sizes, RecordBatch& out, Put put) {
  const size_t base = out.data.size();
  int64_t position = out.positions.empty()
                         ? 0
                         : out.positions.back() + int64_t(kFramingSize) +
                               (out.offsets.back() - out.offsets[out.offsets.size() - 2]);
  size_t total = base;
  out.offsets.reserve(out.offsets.size() + sizes.size());
  out.positions.reserve(out.positions.size() + sizes.size());
  for (size_t size : sizes) {
    out.positions.push_back(position);
    position += int64_t(size + kFramingSize);
    total += size;
    out.offsets.push_back(int64_t(total));
  }
  out.data.reserve(total);  // one allocation, then every record written in place
  uint8_t* p = out.data.data() + base;
  for (size_t i = 0; i < sizes.size(); ++i) p = put(i, p);
  out.data.resize(total);
}

void validate_all(const std::vector<ColumnView>& columns, size_t num_rows) {
  for (const ColumnView& c : columns) validate(c, num_rows);
}

}  // namespace

void validate(const ColumnView& c, size_t num_rows) {
  switch (c.kind) {
    case Kind::kInt64:
    case Kind::kFloat:
    case Kind::kBytes:
    case Kind::kFeature:
      break;
    default:
      fail(c, "unknown kind");
  }
  const size_t values = c.num_values();
  if (!c.present.empty() && c.present.size != num_rows) {
    fail(c, std::to_string(c.present.size) + " present flags for " + std::to_string(num_rows) +
                " rows");
  }
  if (c.num_rows() != num_rows) {
    fail(c, "has " + std::to_string(c.num_rows()) + " rows, not " + std::to_string(num_rows) +
                (c.row_splits.empty() ? " (one value per row)" : " (N + 1 row_splits)"));
  }
  for (size_t i = 0; i < num_rows; ++i) {
    if (!c.has(i)) continue;
    if (!c.row_splits.empty() && (c.row_splits[i] < 0 || c.row_splits[i + 1] < c.row_splits[i])) {
      fail(c, i, "bad row bounds");
    }
    if (c.end(i) > values) fail(c, i, "row ends past the values");
    if (c.kind == Kind::kFeature && c.end(i) - c.begin(i) != 1) {
      fail(c, i, "a serialized Feature row holds 1 value");
    }
  }
}

size_t example_size(const std::vector<ColumnView>& columns, std::vector<uint64_t>& scratch) {
  validate_all(columns, 1);
  scratch.resize(columns.size());
  for (size_t f = 0; f < columns.size(); ++f) scratch[f] = payload_size(columns[f], 0);
  return size_t(field_size(features_size(columns, 0, scratch.data())));
}

void write_example(const std::vector<ColumnView>& columns, const std::vector<uint64_t>& scratch,
                   uint8_t* dst) {
  put_example(columns, 0, scratch.data(), dst);
}

void encode_examples(const std::vector<ColumnView>& columns, size_t num_rows, RecordBatch& out) {
  validate_all(columns, num_rows);
  const size_t nf = columns.size();
  // Every payload size (row major), hence every record size.
  std::vector<uint64_t> payloads(num_rows * nf);
  for (size_t f = 0; f < nf; ++f) {
    for (size_t i = 0; i < num_rows; ++i) payloads[i * nf + f] = payload_size(columns[f], i);
  }
  std::vector<size_t> sizes(num_rows);
  for (size_t i = 0; i < num_rows; ++i) {
    sizes[i] = size_t(field_size(features_size(columns, i, payloads.data() + i * nf)));
  }
  append_records(sizes, out, [&](size_t i, uint8_t* p) {
    return put_example(columns, i, payloads.data() + i * nf, p);
  });
}

namespace {

uint64_t row_feature_size(const ColumnView& c, size_t row) {
  return feature_size(c.kind, payload_size(c, row));
}

uint8_t* put_row_feature(const ColumnView& c, size_t row, uint8_t* p) {
  return put_feature(c, row, payload_size(c, row), p);
}

void validate_steps(const ColumnView& steps, size_t num_steps) {
  if (!steps.present.empty())
    fail(steps, "a step cannot be left out (present flags are for Example columns)");
  validate(steps, num_steps);
}

// The FeatureList message of record `row` of list `l`.
uint64_t feature_list_size(const FeatureListView& l, size_t row) {
  uint64_t n = 0;
  for (int64_t s = l.splits[row]; s < l.splits[row + 1]; ++s) {
    n += field_size(row_feature_size(l.steps, size_t(s)));
  }
  return n;
}

// The FeatureLists message of one record.
uint64_t feature_lists_size(const std::vector<FeatureListView>& lists, size_t row) {
  uint64_t n = 0;
  for (const FeatureListView& l : lists)
    n += field_size(entry_size(l.steps.name, feature_list_size(l, row)));
  return n;
}

uint8_t* put_feature_lists(const std::vector<FeatureListView>& lists, size_t row, uint8_t* p) {
  p = put_header(p, kFeatureListsTag, feature_lists_size(lists, row));
  for (const FeatureListView& l : lists) {
    const uint64_t list = feature_list_size(l, row);
    const std::string& name = l.steps.name;
    p = put_header(p, kEntryTag, entry_size(name, list));
    p = put_header(p, kKeyTag, name.size());
    p = put_bytes(p, reinterpret_cast<const uint8_t*>(name.data()), name.size());
    p = put_header(p, kValueTag, list);
    for (int64_t s = l.splits[row]; s < l.splits[row + 1]; ++s) {
      p = put_header(p, kStepTag, row_feature_size(l.steps, size_t(s)));
      p = put_row_feature(l.steps, size_t(s), p);
    }
  }
  return p;
}

}  // namespace

void encode_sequence_examples(const std::vector<ColumnView>& context,
                              const std::vector<FeatureListView>& lists, size_t num_rows,
                              RecordBatch& out) {
  validate_all(context, num_rows);
  for (const FeatureListView& l : lists) {
    validate_steps(l.steps, l.num_steps);
    if (l.splits.size != num_rows + 1) {
      fail(l.steps, std::to_string(l.splits.size) + " step splits for " + std::to_string(num_rows) +
                        " records (N + 1 needed)");
    }
    for (size_t i = 0; i < num_rows; ++i) {
      if (l.splits[i] < 0 || l.splits[i + 1] < l.splits[i] ||
          uint64_t(l.splits[i + 1]) > l.num_steps) {
        fail(l.steps, i, "bad step splits");
      }
    }
  }
  std::vector<uint64_t> payloads(context.size());
  std::vector<size_t> sizes(num_rows);
  for (size_t i = 0; i < num_rows; ++i) {
    for (size_t f = 0; f < context.size(); ++f) payloads[f] = payload_size(context[f], i);
    sizes[i] = size_t(field_size(features_size(context, i, payloads.data())) +
                      field_size(feature_lists_size(lists, i)));
  }
  append_records(sizes, out, [&](size_t i, uint8_t* p) {
    for (size_t f = 0; f < context.size(); ++f) payloads[f] = payload_size(context[f], i);
    p = put_example(context, i, payloads.data(), p);  // Example.features and context: field 1
    return put_feature_lists(lists, i, p);
  });
}

void encode_features(const ColumnView& column, size_t num_rows, RecordBatch& out) {
  validate_steps(column, num_rows);
  std::vector<size_t> sizes(num_rows);
  for (size_t i = 0; i < num_rows; ++i) sizes[i] = size_t(row_feature_size(column, i));
  append_records(sizes, out, [&](size_t i, uint8_t* p) { return put_row_feature(column, i, p); });
}

}  // namespace tfr
