#include "example_encoder.h"

#include <cstring>
#include <stdexcept>

#include "protobuf_wire.h"
#include "record_format.h"

namespace tfr::example {
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
static_assert(uint32_t(Kind::kBytes) == wire::kBytesList && uint32_t(Kind::kFloat) == wire::kFloatList &&
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

// The row's list payload: the packed bytes of a numeric list, the repeated fields of a bytes
// list, the whole message of a serialized Feature. Everything else follows from it in O(1).
uint64_t payload_size(const Column& c, size_t row) {
  if (!c.has(row)) return 0;
  const size_t b = c.begin(row), e = c.end(row);
  switch (c.row_kind(row)) {
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

inline uint64_t entry_size(const Column& c, uint64_t feature) {
  return field_size(c.name.size()) + field_size(feature);
}

// The Features message of one row, from its payload sizes.
uint64_t features_size(const std::vector<Column>& columns, size_t row, const uint64_t* payloads) {
  uint64_t n = 0;
  for (size_t f = 0; f < columns.size(); ++f) {
    const Column& c = columns[f];
    if (!c.has(row)) continue;
    n += field_size(entry_size(c, feature_size(c.row_kind(row), payloads[f])));
  }
  return n;
}

uint8_t* put_list(const Column& c, size_t row, Kind kind, uint64_t payload, uint8_t* p) {
  const size_t b = c.begin(row), e = c.end(row);
  switch (kind) {
    case Kind::kInt64:
      if (payload == 0) return p;
      p = put_header(p, kListValueTag, payload);
      for (size_t k = b; k < e; ++k) p = put_varint(p, uint64_t(c.int64s[k]));
      return p;
    case Kind::kFloat:
      if (payload == 0) return p;
      p = put_header(p, kListValueTag, payload);
#if !TFR_BIG_ENDIAN
      std::memcpy(p, c.floats + b, size_t(payload));
      return p + payload;
#else
      for (size_t k = b; k < e; ++k) {
        uint32_t bits;
        std::memcpy(&bits, c.floats + k, 4);
        for (int s = 0; s < 32; s += 8) *p++ = uint8_t(bits >> s);
      }
      return p;
#endif
    case Kind::kBytes:
      for (size_t k = b; k < e; ++k) {
        const BytesRef& v = c.bytes[k];
        p = put_header(p, kListValueTag, v.size);
        if (v.size) std::memcpy(p, v.data, v.size);
        p += v.size;
      }
      return p;
    case Kind::kFeature:
      break;
  }
  return p;
}

uint8_t* put_example(const std::vector<Column>& columns, size_t row, const uint64_t* payloads,
                     uint8_t* p) {
  p = put_header(p, kExampleFeaturesTag, features_size(columns, row, payloads));
  for (size_t f = 0; f < columns.size(); ++f) {
    const Column& c = columns[f];
    if (!c.has(row)) continue;
    const Kind kind = c.row_kind(row);
    const uint64_t payload = payloads[f];
    const uint64_t feature = feature_size(kind, payload);
    p = put_header(p, kEntryTag, entry_size(c, feature));
    p = put_header(p, kKeyTag, c.name.size());
    if (!c.name.empty()) std::memcpy(p, c.name.data(), c.name.size());
    p += c.name.size();
    p = put_header(p, kValueTag, feature);
    if (kind == Kind::kFeature) {
      const BytesRef& v = c.bytes[c.begin(row)];
      if (v.size) std::memcpy(p, v.data, v.size);
      p += v.size;
    } else {
      p = put_header(p, tag(uint32_t(kind)), list_size(kind, payload));
      p = put_list(c, row, kind, payload, p);
    }
  }
  return p;
}

[[noreturn]] void fail(const Column& c, size_t row, const std::string& what) {
  throw std::invalid_argument("feature '" + c.name + "', row " + std::to_string(row) + ": " + what);
}

}  // namespace

void validate(const std::vector<Column>& columns, size_t num_rows) {
  for (const Column& c : columns) {
    for (size_t i = 0; i < num_rows; ++i) {
      if (!c.has(i)) continue;
      if (c.begins && (c.begins[i] < 0 || c.ends[i] < c.begins[i])) fail(c, i, "bad row bounds");
      const size_t b = c.begin(i), e = c.end(i);
      const Kind kind = c.row_kind(i);
      size_t limit = 0;
      switch (kind) {
        case Kind::kInt64: limit = c.int64s ? c.num_int64s : 0; break;
        case Kind::kFloat: limit = c.floats ? c.num_floats : 0; break;
        case Kind::kBytes:
        case Kind::kFeature: limit = c.bytes ? c.num_bytes : 0; break;
        default: fail(c, i, "unknown kind");
      }
      if (e > limit) fail(c, i, "row ends past the values");
      if (kind == Kind::kFeature && e - b != 1) fail(c, i, "a serialized Feature row holds 1 value");
    }
  }
}

size_t example_size(const std::vector<Column>& columns, size_t row, std::vector<uint64_t>& scratch) {
  scratch.resize(columns.size());
  for (size_t f = 0; f < columns.size(); ++f) scratch[f] = payload_size(columns[f], row);
  return size_t(field_size(features_size(columns, row, scratch.data())));
}

void write_example(const std::vector<Column>& columns, size_t row,
                   const std::vector<uint64_t>& scratch, uint8_t* dst) {
  put_example(columns, row, scratch.data(), dst);
}

namespace {

// The Feature message of row `row` of `c` (a Feature's bytes as they are, else tag + list).
uint64_t step_feature_size(const Column& c, size_t row) {
  return feature_size(c.row_kind(row), payload_size(c, row));
}

uint8_t* put_feature(const Column& c, size_t row, uint8_t* p) {
  const Kind kind = c.row_kind(row);
  const uint64_t payload = payload_size(c, row);
  if (kind == Kind::kFeature) {
    const BytesRef& v = c.bytes[c.begin(row)];
    if (v.size) std::memcpy(p, v.data, v.size);
    return p + v.size;
  }
  p = put_header(p, tag(uint32_t(kind)), list_size(kind, payload));
  return put_list(c, row, kind, payload, p);
}

// The FeatureList message of record `row` of list `l`.
uint64_t feature_list_size(const FeatureListColumn& l, size_t row) {
  uint64_t n = 0;
  for (int64_t s = l.splits[row]; s < l.splits[row + 1]; ++s) {
    n += field_size(step_feature_size(l.steps, size_t(s)));
  }
  return n;
}

uint64_t list_entry_size(const FeatureListColumn& l, uint64_t list) {
  return field_size(l.steps.name.size()) + field_size(list);
}

// The FeatureLists message of one record.
uint64_t feature_lists_size(const std::vector<FeatureListColumn>& lists, size_t row) {
  uint64_t n = 0;
  for (const FeatureListColumn& l : lists) n += field_size(list_entry_size(l, feature_list_size(l, row)));
  return n;
}

uint8_t* put_feature_lists(const std::vector<FeatureListColumn>& lists, size_t row, uint8_t* p) {
  p = put_header(p, kFeatureListsTag, feature_lists_size(lists, row));
  for (const FeatureListColumn& l : lists) {
    const uint64_t list = feature_list_size(l, row);
    p = put_header(p, kEntryTag, list_entry_size(l, list));
    p = put_header(p, kKeyTag, l.steps.name.size());
    if (!l.steps.name.empty()) std::memcpy(p, l.steps.name.data(), l.steps.name.size());
    p += l.steps.name.size();
    p = put_header(p, kValueTag, list);
    for (int64_t s = l.splits[row]; s < l.splits[row + 1]; ++s) {
      p = put_header(p, kStepTag, step_feature_size(l.steps, size_t(s)));
      p = put_feature(l.steps, size_t(s), p);
    }
  }
  return p;
}

}  // namespace

void encode_sequence_examples(const std::vector<Column>& context,
                              const std::vector<FeatureListColumn>& lists, size_t num_rows,
                              RecordBatch& out) {
  validate(context, num_rows);
  for (const FeatureListColumn& l : lists) {
    if (l.steps.present) {
      throw std::invalid_argument("feature list '" + l.steps.name + "': a step cannot be left out");
    }
    validate({l.steps}, l.num_steps);
    for (size_t i = 0; i < num_rows; ++i) {
      if (l.splits[i] < 0 || l.splits[i + 1] < l.splits[i] ||
          size_t(l.splits[i + 1]) > l.num_steps) {
        fail(l.steps, i, "bad step splits");
      }
    }
  }
  std::vector<uint64_t> payloads(context.size());
  std::vector<size_t> sizes(num_rows);
  size_t total = out.data.size();
  for (size_t i = 0; i < num_rows; ++i) {
    for (size_t f = 0; f < context.size(); ++f) payloads[f] = payload_size(context[f], i);
    sizes[i] = size_t(field_size(features_size(context, i, payloads.data())) +
                      field_size(feature_lists_size(lists, i)));
    total += sizes[i];
  }
  const size_t base = out.data.size();
  out.data.reserve(total);
  uint8_t* p = out.data.data() + base;
  int64_t position = out.positions.empty()
                         ? 0
                         : out.positions.back() + int64_t(kFramingSize) +
                               (out.offsets.back() - out.offsets[out.offsets.size() - 2]);
  for (size_t i = 0; i < num_rows; ++i) {
    for (size_t f = 0; f < context.size(); ++f) payloads[f] = payload_size(context[f], i);
    p = put_example(context, i, payloads.data(), p);  // Example.features and context: field 1
    p = put_feature_lists(lists, i, p);
    out.offsets.push_back(out.offsets.back() + int64_t(sizes[i]));
    out.positions.push_back(position);
    position += int64_t(sizes[i] + kFramingSize);
  }
  out.data.resize(total);
}

void encode_examples(const std::vector<Column>& columns, size_t num_rows, RecordBatch& out) {
  validate(columns, num_rows);
  const size_t nf = columns.size();
  // Pass 1: every payload size (row major), hence every record size.
  std::vector<uint64_t> payloads(num_rows * nf);
  for (size_t f = 0; f < nf; ++f) {
    const Column& c = columns[f];
    for (size_t i = 0; i < num_rows; ++i) payloads[i * nf + f] = payload_size(c, i);
  }
  const size_t base = out.data.size();
  const int64_t position_base = out.positions.empty()
                                    ? 0
                                    : out.positions.back() + int64_t(kFramingSize) + (out.offsets.back() -
                                                                   out.offsets[out.offsets.size() - 2]);
  out.offsets.reserve(out.offsets.size() + num_rows);
  out.positions.reserve(out.positions.size() + num_rows);
  size_t total = base;
  int64_t position = position_base;
  for (size_t i = 0; i < num_rows; ++i) {
    const size_t size = size_t(field_size(features_size(columns, i, payloads.data() + i * nf)));
    out.positions.push_back(position);
    position += int64_t(size + kFramingSize);
    total += size;
    out.offsets.push_back(int64_t(total));
  }
  // Pass 2: one allocation, then write every record in place.
  out.data.reserve(total);
  uint8_t* p = out.data.data() + base;
  for (size_t i = 0; i < num_rows; ++i) p = put_example(columns, i, payloads.data() + i * nf, p);
  out.data.resize(total);
}

}  // namespace tfr::example
