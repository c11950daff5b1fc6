// The tf.train.Example / SequenceExample decoder on wire-format edge cases: packed and unpacked
// lists, unknown fields at every level, wrong wire types, truncated varints, list kinds that do
// not match the spec, missing features and defaults, protobuf's merge rules, and every byte of a
// record cut or changed. Records are built here with a few lines of wire-format writing, and each
// one decoded alone sits in a heap block of exactly its size, so AddressSanitizer sees any read
// past its end.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "check.h"
#include "example_decoder.h"

using tfr::Column;
using tfr::FieldSpec;
using tfr::Kind;
using tfr::Layout;

namespace {

// ---- writing the wire format ----------------------------------------------------------------

std::string varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out += char(uint8_t(v) | 0x80);
    v >>= 7;
  }
  out += char(v);
  return out;
}

std::string key(uint32_t field, uint32_t wire_type) {
  return varint(uint64_t(field) << 3 | wire_type);
}
std::string message(uint32_t field, const std::string& body) {
  return key(field, 2) + varint(body.size()) + body;
}
std::string fixed32(uint32_t field, uint32_t bits) {
  std::string out = key(field, 5);
  for (int i = 0; i < 4; ++i) out += char(uint8_t(bits >> (8 * i)));
  return out;
}
uint32_t float_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

// Lists (the value field is 1 in each), and the Feature holding one (oneof field 1, 2 or 3).
std::string int64_list(const std::vector<int64_t>& values, bool packed = true) {
  std::string out;
  for (int64_t v : values) out += packed ? varint(uint64_t(v)) : key(1, 0) + varint(uint64_t(v));
  return packed && !values.empty() ? message(1, out) : out;
}
std::string float_list(const std::vector<float>& values, bool packed = true) {
  std::string out;
  for (float v : values)
    out += packed ? fixed32(1, float_bits(v)).substr(1) : fixed32(1, float_bits(v));
  return packed && !values.empty() ? message(1, out) : out;
}
std::string bytes_list(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) out += message(1, v);
  return out;
}
std::string int64s(const std::vector<int64_t>& values, bool packed = true) {
  return message(3, int64_list(values, packed));
}
std::string floats(const std::vector<float>& values, bool packed = true) {
  return message(2, float_list(values, packed));
}
std::string strings(const std::vector<std::string>& values) {
  return message(1, bytes_list(values));
}

// A Features map (or FeatureLists map) from (name, value message) entries, in the given order.
using Entries = std::vector<std::pair<std::string, std::string>>;
std::string map_of(const Entries& entries) {
  std::string out;
  for (const auto& [name, value] : entries) out += message(1, message(1, name) + message(2, value));
  return out;
}
std::string example(const Entries& features) { return message(1, map_of(features)); }
std::string feature_list(const std::vector<std::string>& steps) {
  std::string out;
  for (const std::string& step : steps) out += message(1, step);
  return out;
}
std::string sequence_example(const Entries& context, const Entries& lists) {
  return message(1, map_of(context)) + message(2, map_of(lists));
}

// ---- specs ----------------------------------------------------------------------------------

FieldSpec var(const std::string& name, Kind kind) {
  FieldSpec s;
  s.name = name;
  s.kind = kind;
  s.layout = Layout::kVar;
  return s;
}
FieldSpec fixed(const std::string& name, Kind kind, size_t count) {
  FieldSpec s = var(name, kind);
  s.layout = Layout::kFixed;
  s.count = count;
  return s;
}
template <typename T>
FieldSpec with_default(FieldSpec s, const std::vector<T>& values) {
  s.has_default = true;
  s.default_value.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(s.default_value.data(), values.data(), s.default_value.size());
  return s;
}
FieldSpec raw(const std::string& name, size_t bytes) {
  FieldSpec s = var(name, Kind::kBytes);
  s.layout = Layout::kRawBytes;
  s.count = bytes;
  return s;
}
FieldSpec steps(FieldSpec s) {
  s.sequence = true;
  return s;
}

// ---- decoding -------------------------------------------------------------------------------

// Records joined in one buffer, and the columns decoded from it (bytes values point into it).
struct Decoded {
  std::unique_ptr<uint8_t[]> data;
  size_t size = 0;
  std::vector<Column> columns;

  std::vector<int64_t> ints(size_t k) const { return values<int64_t>(k); }
  std::vector<float> reals(size_t k) const { return values<float>(k); }
  std::vector<std::string> strs(size_t k) const {
    std::vector<std::string> out;
    const Column& c = columns[k];
    for (size_t j = 0; j < c.starts.size(); ++j) {
      out.push_back(c.starts[j] < 0
                        ? "<default>"
                        : std::string(reinterpret_cast<const char*>(data.get()) + c.starts[j],
                                      size_t(c.ends[j] - c.starts[j])));
    }
    return out;
  }
  std::string raw_bytes(size_t k) const {
    return std::string(reinterpret_cast<const char*>(columns[k].values.data()),
                       columns[k].values.size());
  }

 private:
  template <typename T>
  std::vector<T> values(size_t k) const {
    std::vector<T> out(columns[k].values.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), columns[k].values.data(), out.size() * sizeof(T));
    return out;
  }
};

// Decodes the records as one batch from a buffer of exactly their joined size (a prefix of
// `junk` bytes before them, when given, checks offsets that do not start at 0).
Decoded decode(const std::vector<std::string>& records, const std::vector<FieldSpec>& specs,
               bool sequences = false, const std::string& junk = "", size_t num_threads = 1,
               tfr::BufferPool* pool = nullptr) {
  std::string joined = junk;
  std::vector<int64_t> offsets{int64_t(junk.size())};
  for (const std::string& r : records) {
    joined += r;
    offsets.push_back(int64_t(joined.size()));
  }
  Decoded out;
  out.size = joined.size();
  out.data.reset(new uint8_t[joined.size()]);
  if (!joined.empty()) std::memcpy(out.data.get(), joined.data(), joined.size());
  out.columns = tfr::decode_examples(out.data.get(), offsets.data(), records.size(), specs,
                                     sequences, num_threads, pool);
  REQUIRE_EQ(out.columns.size(), specs.size());
  return out;
}

std::optional<tfr::ParseError> parse_error(const std::vector<std::string>& records,
                                           const std::vector<FieldSpec>& specs,
                                           bool sequences = false) {
  return check::thrown<tfr::ParseError>([&] { decode(records, specs, sequences); });
}

// The error names record `index` and, when `feature` is not empty, that feature.
void expect_error(const std::optional<tfr::ParseError>& e, size_t index, const std::string& feature,
                  const std::string& words) {
  REQUIRE(e) << "expected a ParseError: " << words;
  CHECK_EQ(e->record_index, index) << e->what();
  CHECK_EQ(e->has_feature, !feature.empty()) << e->what();
  CHECK_EQ(e->feature, feature) << e->what();
  CHECK(std::string(e->what()).find(words) != std::string::npos) << e->what() << " lacks " << words;
}

const std::vector<int64_t> kInts = {0, 1, -1, 127, 128, 300, INT64_MAX, INT64_MIN, -300};

}  // namespace

TEST(int64_packed_unpacked_and_both) {
  const std::vector<FieldSpec> specs = {var("x", Kind::kInt64)};
  const std::string both =
      message(3, int64_list({0, 1, -1, 127}, true) +
                     int64_list({128, 300, INT64_MAX, INT64_MIN, -300}, false));
  auto d = decode({example({{"x", int64s(kInts, true)}}), example({{"x", int64s(kInts, false)}}),
                   example({{"x", both}})},
                  specs);
  std::vector<int64_t> three_times;
  for (int i = 0; i < 3; ++i) three_times.insert(three_times.end(), kInts.begin(), kInts.end());
  CHECK(d.ints(0) == three_times);
  CHECK(d.columns[0].row_splits == (std::vector<int64_t>{0, 9, 18, 27}));
}

TEST(float_packed_unpacked_and_nan_bits) {
  const std::vector<float> values = {0.0f, -0.0f, 1.5f, -3.25e38f, INFINITY, 1e-45f};
  auto d = decode({example({{"f", floats(values, true)}}), example({{"f", floats(values, false)}})},
                  {fixed("f", Kind::kFloat, values.size())});
  std::vector<float> twice = values;
  twice.insert(twice.end(), values.begin(), values.end());
  CHECK_EQ(d.columns[0].values.size(), twice.size() * 4);
  CHECK(std::memcmp(d.columns[0].values.data(), twice.data(), twice.size() * 4) == 0)
      << "bit for bit";
  // A NaN payload survives as written.
  const uint32_t nan_bits = 0x7fc01234u;
  auto n = decode({example({{"f", message(2, message(1, fixed32(1, nan_bits).substr(1)))}})},
                  {var("f", Kind::kFloat)});
  uint32_t got = 0;
  REQUIRE_EQ(n.columns[0].values.size(), 4u);
  std::memcpy(&got, n.columns[0].values.data(), 4);
  CHECK_EQ(got, nan_bits);
}

TEST(packed_floats_of_a_length_not_a_multiple_of_4) {
  const std::string bad = message(2, message(1, std::string(7, '\0')));
  expect_error(parse_error({example({{"f", floats({1.0f})}}), example({{"f", bad}})},
                           {var("f", Kind::kFloat)}),
               1, "f", "a bad packed float list");
}

TEST(bytes_values_point_into_the_records) {
  const std::string junk = "0123456789";
  auto d = decode({example({{"b", strings({"", "abc", std::string(300, 'z')})}}),
                   example({{"b", strings({})}}), example({{"b", strings({"last"})}})},
                  {var("b", Kind::kBytes)}, false, junk);
  CHECK(d.strs(0) == (std::vector<std::string>{"", "abc", std::string(300, 'z'), "last"}));
  CHECK(d.columns[0].row_splits == (std::vector<int64_t>{0, 3, 3, 4}));
  for (size_t j = 0; j < d.columns[0].starts.size(); ++j) {
    CHECK(d.columns[0].starts[j] >= int64_t(junk.size()) &&
          d.columns[0].ends[j] <= int64_t(d.size));
  }
  CHECK(d.columns[0].values.size() == 0) << "bytes are not copied";
}

TEST(no_records_and_empty_records) {
  const std::vector<FieldSpec> specs = {
      var("v", Kind::kInt64), var("b", Kind::kBytes),
      with_default(fixed("d", Kind::kFloat, 1), std::vector<float>{2.5f})};
  auto none = decode({}, specs);
  CHECK(none.columns[0].row_splits == std::vector<int64_t>{0});
  CHECK(none.columns[1].row_splits == std::vector<int64_t>{0});
  CHECK(none.columns[2].values.size() == 0);
  // A record of zero bytes is an Example without features; so is one with an empty map.
  auto empty = decode({"", example({}), message(1, "")}, specs);
  CHECK(empty.columns[0].row_splits == (std::vector<int64_t>{0, 0, 0, 0}));
  CHECK(empty.reals(2) == (std::vector<float>{2.5f, 2.5f, 2.5f}));
}

TEST(var_layout_missing_and_required) {
  FieldSpec required = var("r", Kind::kInt64);
  required.required = true;
  const std::vector<FieldSpec> specs = {var("v", Kind::kInt64), required};
  auto d = decode(
      {example({{"v", int64s({1, 2})}, {"r", int64s({})}}), example({{"r", int64s({7})}})}, specs);
  CHECK(d.ints(0) == (std::vector<int64_t>{1, 2}));
  CHECK(d.columns[0].row_splits == (std::vector<int64_t>{0, 2, 2}));
  CHECK(d.columns[1].row_splits == (std::vector<int64_t>{0, 0, 1}))
      << "present but empty is not missing";
  expect_error(parse_error({example({{"r", int64s({1})}}), example({{"v", int64s({1})}})}, specs),
               1, "r", "is missing (the spec requires it)");
}

TEST(fixed_layout_counts_and_defaults) {
  const std::vector<FieldSpec> specs = {
      with_default(fixed("i", Kind::kInt64, 2), std::vector<int64_t>{-1, -2}),
      with_default(fixed("s", Kind::kBytes, 2), std::vector<uint8_t>{}),
      fixed("f", Kind::kFloat, 1)};
  auto d =
      decode({example({{"i", int64s({5, 6})}, {"s", strings({"a", "b"})}, {"f", floats({1.0f})}}),
              example({{"f", floats({2.0f})}})},
             specs);
  CHECK(d.ints(0) == (std::vector<int64_t>{5, 6, -1, -2}));
  CHECK(d.strs(1) == (std::vector<std::string>{"a", "b", "<default>", "<default>"}));
  CHECK(d.reals(2) == (std::vector<float>{1.0f, 2.0f}));
  expect_error(parse_error({example({{"i", int64s({5, 6, 7})}, {"f", floats({1.0f})}})}, specs), 0,
               "i", "has 3 values, the spec asks for 2");
  expect_error(
      parse_error({example({{"f", floats({1.0f})}}), example({{"i", int64s({1, 2})}})}, specs), 1,
      "f", "is missing and has no default");
}

TEST(pooled_columns_overwrite_what_their_buffers_held) {
  // Large fixed-size columns take kept buffers, here full of 0xAB: every record's slot must be
  // written (its value or its default), whatever the buffer held, with 1 thread or 2.
  const size_t n = 300, ints = 512, bytes = 4096;  // two columns of 1.2 MB
  std::vector<std::string> records;
  for (size_t i = 0; i < n; ++i) {
    Entries features = {{"r", strings({std::string(bytes, char(i))})}};
    if (i % 7 != 3) features.push_back({"i", int64s(std::vector<int64_t>(ints, int64_t(i)))});
    records.push_back(example(features));
  }
  const std::vector<FieldSpec> specs = {
      with_default(fixed("i", Kind::kInt64, ints), std::vector<int64_t>(ints, -1)),
      raw("r", bytes)};
  for (size_t threads : {1, 2}) {
    tfr::BufferPool pool(8);
    for (int k = 0; k < 2; ++k) {
      tfr::ByteBuffer garbage;
      garbage.reserve(size_t(2) << 20);
      std::memset(garbage.data(), 0xAB, garbage.capacity());
      pool.give(std::move(garbage));
    }
    auto d = decode(records, specs, false, "", threads, &pool);
    CHECK_EQ(pool.kept_bytes(), size_t(0)) << "both columns took a kept buffer";
    const std::vector<int64_t> got = d.ints(0);
    REQUIRE_EQ(got.size(), n * ints);
    std::string raw_want;
    for (size_t i = 0; i < n; ++i) {
      const int64_t want = i % 7 == 3 ? -1 : int64_t(i);
      CHECK(std::all_of(got.begin() + i * ints, got.begin() + (i + 1) * ints,
                        [&](int64_t v) { return v == want; }))
          << "record " << i;
      raw_want += std::string(bytes, char(i));
    }
    CHECK(d.raw_bytes(1) == raw_want);
  }
}

TEST(raw_bytes_layout) {
  const std::vector<FieldSpec> specs = {
      with_default(raw("img", 4), std::vector<uint8_t>{9, 9, 9, 9})};
  auto d = decode(
      {example({{"img", strings({"abcd"})}}), example({}), example({{"img", strings({"wxyz"})}})},
      specs);
  CHECK_EQ(d.raw_bytes(0), std::string("abcd\x09\x09\x09\x09wxyz"));
  CHECK(d.columns[0].starts.empty() && d.columns[0].ends.empty());
  expect_error(parse_error({example({{"img", strings({"abc"})}})}, specs), 0, "img",
               "holds 3 bytes, the spec's shape and dtype need 4");
  expect_error(parse_error({example({{"img", strings({"abcd", "abcd"})}})}, specs), 0, "img",
               "has 2 bytes values, the spec asks for 1");
  expect_error(parse_error({example({{"img", strings({})}})}, specs), 0, "img",
               "has 0 bytes values");
  expect_error(parse_error({example({})}, {raw("img", 4)}), 0, "img",
               "is missing and has no default");
}

TEST(list_kinds_that_do_not_match_the_spec) {
  struct Case {
    Kind spec;
    std::string feature;
    const char* words;
  };
  const Case cases[] = {
      {Kind::kInt64, floats({1.0f}), "holds a float_list, the spec asks for an int64_list"},
      {Kind::kInt64, strings({"a"}), "holds a bytes_list, the spec asks for an int64_list"},
      {Kind::kFloat, int64s({1}), "holds an int64_list, the spec asks for a float_list"},
      {Kind::kBytes, int64s({}), "holds an int64_list, the spec asks for a bytes_list"},
  };
  for (const Case& c : cases) {
    expect_error(parse_error({example({}), example({{"x", c.feature}})}, {var("x", c.spec)}), 1,
                 "x", c.words);
  }
}

// A Feature with no list set is an empty feature: no values, whatever the spec's kind.
TEST(a_feature_without_a_list) {
  auto d = decode({example({{"x", ""}}), example({{"x", key(9, 0) + varint(5)}})},
                  {var("x", Kind::kFloat)});
  CHECK(d.columns[0].row_splits == (std::vector<int64_t>{0, 0, 0}));
  decode({example({{"x", ""}})}, {fixed("x", Kind::kInt64, 0)});
  expect_error(parse_error({example({{"x", ""}})}, {fixed("x", Kind::kInt64, 2)}), 0, "x",
               "has 0 values, the spec asks for 2");
}

// Unknown fields of every wire type, at every level of the message, are skipped.
TEST(unknown_fields_at_every_level) {
  const std::string unknown = key(15, 0) + varint(300) + key(16, 1) + std::string(8, '\x01') +
                              fixed32(17, 5) + message(18, "ignored");
  const std::string list = message(1, varint(1) + varint(2)) + unknown + key(1, 0) + varint(3);
  const std::string feature = unknown + message(3, list) + unknown;
  const std::string entry = unknown + message(1, "x") + unknown + message(2, feature) + unknown;
  const std::string features = unknown + message(1, entry) + unknown;
  const std::string record = unknown + message(1, features) + unknown;
  auto d = decode({record}, {var("x", Kind::kInt64)});
  CHECK(d.ints(0) == (std::vector<int64_t>{1, 2, 3}));
  // Example field 2 is unknown outside SequenceExample mode.
  auto e = decode({example({{"x", int64s({4})}}) + message(2, "junk")}, {var("x", Kind::kInt64)});
  CHECK(e.ints(0) == (std::vector<int64_t>{4}));
}

// A known field number with another wire type is an unknown field where protobuf would skip it;
// a list value of the wrong wire type is refused, naming the feature.
TEST(wrong_wire_types) {
  const std::vector<FieldSpec> specs = {var("x", Kind::kInt64)};
  // Example.features, the map entry, its key, its value, and the Feature's list as varints.
  for (const std::string& record :
       {key(1, 0) + varint(5), message(1, key(1, 0) + varint(5)),
        message(1, message(1, key(1, 0) + varint(5) + message(2, int64s({1})))),
        message(1, message(1, message(1, "x") + key(2, 0) + varint(5))),
        example({{"x", key(3, 0) + varint(5)}})}) {
    auto d = decode({record}, specs);
    CHECK(d.columns[0].row_splits == (std::vector<int64_t>{0, 0})) << check::show(record);
  }
  expect_error(parse_error({example({{"x", message(3, fixed32(1, 7))}})}, specs), 0, "x",
               "an int64 with the wrong wire type");
  expect_error(
      parse_error({example({{"x", message(2, key(1, 0) + varint(1))}})}, {var("x", Kind::kFloat)}),
      0, "x", "a float with the wrong wire type");
  expect_error(
      parse_error({example({{"x", message(1, key(1, 0) + varint(1))}})}, {var("x", Kind::kBytes)}),
      0, "x", "a bad bytes value");
}

TEST(groups_and_reserved_wire_types_are_malformed) {
  const std::vector<FieldSpec> specs = {var("x", Kind::kInt64)};
  for (uint32_t wire_type : {3u, 4u, 6u, 7u}) {
    const std::string bad = key(9, wire_type);
    expect_error(parse_error({example({}) + bad}, specs), 0, "", "not a valid tf.train.Example");
    expect_error(parse_error({message(1, bad)}, specs), 0, "", "not a valid tf.train.Example");
    expect_error(parse_error({message(1, message(1, bad))}, specs), 0, "",
                 "not a valid tf.train.Example");
    expect_error(parse_error({example({{"x", bad}})}, specs), 0, "x", "Feature");
    expect_error(parse_error({example({{"x", message(3, bad)}})}, specs), 0, "x", "value list");
  }
}

TEST(truncated_and_overlong_varints) {
  const std::vector<FieldSpec> specs = {var("x", Kind::kInt64)};
  const std::string overlong = std::string(10, '\x80') + "\x01";  // 11 bytes
  const struct {
    std::string record;
    std::string feature;
  } cases[] = {
      {"\x80", ""},                                               // a tag cut short
      {key(1, 2) + "\x85", ""},                                   // a length cut short
      {key(1, 2) + varint(5) + "abc", ""},                        // a length past the end
      {key(0, 0) + varint(1), ""},                                // field number 0
      {overlong + varint(1), ""},                                 // an 11-byte tag
      {key(7, 0) + "\xff\xff", ""},                               // an unknown varint cut short
      {key(7, 0) + overlong, ""},                                 // an overlong unknown varint
      {key(7, 1) + "1234567", ""},                                // a fixed64 cut short
      {key(7, 5) + "123", ""},                                    // a fixed32 cut short
      {example({{"x", message(3, message(1, "\x81"))}}), "x"},    // a packed value cut short
      {example({{"x", message(3, key(1, 0) + "\x81")}}), "x"},    // an unpacked one
      {example({{"x", message(3, message(1, overlong))}}), "x"},  // an overlong packed one
      {example({{"x", message(3, key(1, 0) + overlong)}}), "x"},
      {example({{"x", message(2, key(1, 5) + "\x01\x02")}}), "x"},  // a float cut short
  };
  for (const auto& c : cases) {
    auto e = parse_error({c.record}, specs);
    REQUIRE(e) << check::show(c.record);
    CHECK_EQ(e->has_feature, !c.feature.empty()) << check::show(c.record) << ": " << e->what();
    CHECK_EQ(e->record_index, 0u);
  }
  // The largest values fit: a 10-byte varint.
  auto d = decode({example({{"x", int64s({-1}, false)}})}, specs);
  CHECK(d.ints(0) == std::vector<int64_t>{-1});
}

// Protobuf merge rules: a repeated map key keeps its last value; Features messages given twice
// merge; the last list kind set in a Feature wins, and repeating the same kind appends.
TEST(protobuf_merge_rules) {
  const std::vector<FieldSpec> ints = {var("x", Kind::kInt64)};
  auto d = decode({example({{"x", int64s({1})}, {"y", int64s({2})}, {"x", int64s({3})}})}, ints);
  CHECK(d.ints(0) == std::vector<int64_t>{3}) << "the last entry of a key wins";
  d = decode({example({{"x", int64s({1})}}) + example({{"y", int64s({2})}})},
             {var("x", Kind::kInt64), var("y", Kind::kInt64)});
  CHECK(d.ints(0) == std::vector<int64_t>{1});
  CHECK(d.ints(1) == std::vector<int64_t>{2});
  d = decode({example({{"x", int64s({1, 2}) + int64s({3})}})}, ints);
  CHECK(d.ints(0) == (std::vector<int64_t>{1, 2, 3})) << "the same list twice appends";
  d = decode({example({{"x", int64s({1}) + floats({2.0f}) + int64s({3})}})}, ints);
  CHECK(d.ints(0) == std::vector<int64_t>{3}) << "switching kinds clears";
  expect_error(parse_error({example({{"x", int64s({1}) + floats({2.0f})}})}, ints), 0, "x",
               "holds a float_list");
  // A map entry whose key comes twice keeps the last.
  d = decode({message(1, message(1, message(1, "y") + message(1, "x") + message(2, int64s({5}))))},
             ints);
  CHECK(d.ints(0) == std::vector<int64_t>{5});
  // A list that a later kind replaces is dropped, but protobuf parses it: what it rejects there
  // (a truncated packed varint, a packed float list of 5 bytes, a bad field inside the list) is
  // rejected; a value of another wire type is an unknown field to it, and kept out of the way.
  const std::string bad_lists[] = {message(2, message(1, "\x80")), message(3, message(1, "\x80")),
                                   message(2, message(1, std::string(5, '\0'))),
                                   message(1, key(1, 2) + varint(9) + "ab"),
                                   message(3, key(1, 2) + varint(9) + "ab")};
  for (const std::string& bad : bad_lists) {
    expect_error(parse_error({example({{"x", bad + int64s({3})}})}, ints), 0, "x", "");
    if (bad[0] != message(3, "")[0]) {  // of another kind: replaced
      expect_error(parse_error({example({{"x", int64s({1}) + bad + int64s({3})}})}, ints), 0, "x",
                   "");
    }
  }
  d = decode({example({{"x", message(2, fixed32(1, 7) + key(1, 0) + varint(1)) +
                                 message(1, key(1, 0) + varint(1)) + int64s({3})}})},
             ints);
  CHECK(d.ints(0) == std::vector<int64_t>{3}) << "values of another wire type in a replaced list";
}

// A fixed-size feature of no values (shape (0,)): no slots to copy into, on the learned layout
// too (an empty copy there once handed memcpy a null slot: UBSan's report).
TEST(fixed_size_of_no_values_on_the_layout) {
  for (const Kind kind : {Kind::kFloat, Kind::kInt64}) {
    std::vector<std::string> records;
    for (int i = 0; i < 12; ++i) {
      const std::string empty = kind == Kind::kFloat ? floats({}) : int64s({});
      records.push_back(example({{"x", empty}, {"y", int64s({i})}}));
    }
    const auto d = decode(records, {fixed("x", kind, 0), fixed("y", Kind::kInt64, 1)});
    CHECK_EQ(d.ints(1).size(), 12u);
    CHECK_EQ(d.ints(1)[11], 11);
  }
}

// A map entry whose value (a singular message field) comes more than once: protobuf merges the
// Features, as if their bytes were one message. The same list kind again appends, another kind
// replaces, a part without a list changes nothing; the key may come anywhere in the entry.
namespace {
std::string entry_with_values(const std::string& name, const std::vector<std::string>& values,
                              size_t key_at = 0) {
  std::string body;
  for (size_t i = 0; i <= values.size(); ++i) {
    if (i == key_at) body += message(1, name);
    if (i < values.size()) body += message(2, values[i]);
  }
  return message(1, body);
}
}  // namespace

TEST(a_map_entry_value_given_twice_merges) {
  const std::vector<FieldSpec> ints = {var("x", Kind::kInt64)};
  const auto record = [](const std::vector<std::string>& values, size_t key_at = 0) {
    return message(1, entry_with_values("x", values, key_at));
  };
  auto d = decode({record({int64s({5}), int64s({6, 7})})}, ints);
  CHECK(d.ints(0) == (std::vector<int64_t>{5, 6, 7})) << "the same kind appends";
  d = decode({record({int64s({5}), int64s({6}), int64s({7})}, 3)}, ints);
  CHECK(d.ints(0) == (std::vector<int64_t>{5, 6, 7})) << "three parts, the key last";
  d = decode({record({floats({1.0f}), int64s({6})}, 1)}, ints);
  CHECK(d.ints(0) == std::vector<int64_t>{6}) << "another kind replaces";
  d = decode({record({int64s({5}), ""})}, ints);
  CHECK(d.ints(0) == std::vector<int64_t>{5}) << "a part without a list keeps the list";
  d = decode({record({int64s({1}) + floats({2.0f}), int64s({3}) + key(9, 0) + varint(1),
                      int64s({4}, false)})},
             ints);
  CHECK(d.ints(0) == (std::vector<int64_t>{3, 4})) << "the run of the last kind, across parts";
  d = decode({record({"", ""})}, ints);
  CHECK(d.ints(0).empty());
  CHECK(d.columns[0].present == std::vector<uint8_t>{1}) << "present, with no list";
  expect_error(parse_error({record({int64s({5}), floats({6.0f})})}, ints), 0, "x",
               "holds a float_list");
  expect_error(parse_error({record({int64s({5}), message(3, "\x0a\x05")})}, ints), 0, "x", "");

  // Fixed sizes count the merged values; bytes values point into each part.
  d = decode({record({floats({1.0f}), floats({2.0f}, false)})}, {fixed("x", Kind::kFloat, 2)});
  CHECK(d.reals(0) == (std::vector<float>{1.0f, 2.0f}));
  expect_error(parse_error({record({int64s({1}), int64s({2})})}, {fixed("x", Kind::kInt64, 1)}), 0,
               "x", "has 2 values");
  d = decode({record({strings({"ab"}), strings({"c", "de"})})}, {var("x", Kind::kBytes)});
  CHECK(d.strs(0) == (std::vector<std::string>{"ab", "c", "de"}));
  d = decode({record({floats({1.0f}), strings({"raw"})})}, {raw("x", 3)});
  CHECK_EQ(d.raw_bytes(0), std::string("raw"));

  // In a batch whose other records the learned layout takes, and between them: the same values.
  std::vector<std::string> records;
  for (int i = 0; i < 12; ++i) {
    records.push_back(i % 4 == 3 ? record({int64s({i}), int64s({100 + i})})
                                 : example({{"x", int64s({i})}}));
  }
  d = decode(records, ints);
  CHECK(d.ints(0) == (std::vector<int64_t>{0, 1, 2, 3, 103, 4, 5, 6, 7, 107, 8, 9, 10, 11, 111}));

  // A FeatureList given twice: the steps of both. A context Feature: as in an Example.
  const std::string seq =
      message(1, entry_with_values("c", {floats({1.5f}), floats({2.5f})})) +
      message(2, entry_with_values("s", {feature_list({int64s({1}), int64s({2, 3})}),
                                         feature_list({int64s({4})})}));
  d = decode({seq}, {var("c", Kind::kFloat), steps(var("s", Kind::kInt64))}, true);
  CHECK(d.reals(0) == (std::vector<float>{1.5f, 2.5f}));
  CHECK(d.ints(1) == (std::vector<int64_t>{1, 2, 3, 4}));
  CHECK(d.columns[1].row_splits == (std::vector<int64_t>{0, 3}));
  CHECK(d.columns[1].step_splits == (std::vector<int64_t>{0, 1, 3, 4}));

  // The kind scan: the merged Feature's kind (a part without a list keeps the kind before it).
  const std::vector<std::string> scanned = {
      record({floats({1.0f}), ""}),
      message(1, entry_with_values("y", {floats({1.0f}), int64s({2})})),
      message(1, entry_with_values("z", {"", ""}))};
  std::string joined;
  std::vector<int64_t> offsets{0};
  for (const std::string& r : scanned) {
    joined += r;
    offsets.push_back(int64_t(joined.size()));
  }
  const auto kinds = tfr::feature_kinds(reinterpret_cast<const uint8_t*>(joined.data()),
                                        offsets.data(), scanned.size(), false, true);
  REQUIRE_EQ(kinds.size(), 3u);
  CHECK(kinds[0].kind == Kind::kFloat);
  CHECK(kinds[1].kind == Kind::kInt64);
  CHECK(!kinds[2].kind);
}

// Names of every length class the matcher compares differently (0, < 8, 8..16, > 16 bytes) and
// names that differ only in their first or last byte, in a different order in each record.
TEST(names_of_every_length_in_any_order) {
  const std::vector<std::string> names = {"",
                                          "a",
                                          "b",
                                          "feature",
                                          "featurf",
                                          "feature0",
                                          "feature1",
                                          "abcdefghi",
                                          "bbcdefghi",
                                          "abcdefghj",
                                          "0123456789abcde",
                                          "0123456789abcdf",
                                          "0123456789abcdef",
                                          "1123456789abcdef",
                                          "0123456789abcdefg",
                                          "0123456789abcdefh",
                                          "image/object/bbox/xmin",
                                          "image/object/bbox/xmax"};
  std::vector<FieldSpec> specs;
  for (const std::string& name : names) specs.push_back(var(name, Kind::kInt64));
  std::vector<std::string> records;
  std::vector<std::vector<int64_t>> want(names.size());
  std::vector<size_t> order(names.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::mt19937 rng(3);
  for (size_t r = 0; r < 6; ++r) {
    Entries entries;
    if (r > 1) std::shuffle(order.begin(), order.end(), rng);  // the first two share an order
    for (size_t i : order) {
      if ((i + r) % 5 == 0) continue;  // some missing
      entries.emplace_back(names[i], int64s({int64_t(100 * r + i)}));
      want[i].push_back(int64_t(100 * r + i));
      if (r == 3) entries.emplace_back(names[i] + "~", int64s({-1}));  // near misses
    }
    records.push_back(example(entries));
  }
  auto d = decode(records, specs);
  for (size_t k = 0; k < names.size(); ++k) {
    CHECK(d.ints(k) == want[k]) << "name " << check::show(names[k]);
  }
}

TEST(sequence_examples) {
  const std::vector<FieldSpec> specs = {var("id", Kind::kInt64), steps(var("tokens", Kind::kInt64)),
                                        steps(fixed("xy", Kind::kFloat, 2)),
                                        steps(var("id", Kind::kBytes))};
  const std::string r0 = sequence_example(
      {{"id", int64s({7})}}, {{"tokens", feature_list({int64s({1, 2}), int64s({}), int64s({3})})},
                              {"xy", feature_list({floats({1, 2}), floats({3, 4})})},
                              {"id", feature_list({strings({"a"})})}});
  const std::string r1 = sequence_example({{"id", int64s({8})}}, {});  // no lists: no steps
  const std::string r2 = message(1, map_of({{"id", int64s({9})}}));    // no feature_lists at all
  auto d = decode({r0, r1, r2}, specs, true);
  CHECK(d.ints(0) == (std::vector<int64_t>{7, 8, 9}));
  CHECK(d.ints(1) == (std::vector<int64_t>{1, 2, 3}));
  CHECK(d.columns[1].row_splits == (std::vector<int64_t>{0, 3, 3, 3})) << "steps per record";
  CHECK(d.columns[1].step_splits == (std::vector<int64_t>{0, 2, 2, 3})) << "values per step";
  CHECK(d.reals(2) == (std::vector<float>{1, 2, 3, 4}));
  CHECK(d.columns[2].row_splits == (std::vector<int64_t>{0, 2, 2, 2}));
  CHECK(d.columns[2].step_splits.empty());
  CHECK(d.strs(3) == std::vector<std::string>{"a"});

  expect_error(
      parse_error(
          {r1, sequence_example({}, {{"xy", feature_list({floats({1, 2}), floats({1, 2, 3})})}})},
          specs, true),
      1, "xy", "step 1 has 3 values, the spec asks for 2");
  expect_error(
      parse_error({sequence_example({}, {{"tokens", feature_list({floats({1})})}})}, specs, true),
      0, "tokens", "holds a float_list");
  expect_error(parse_error({sequence_example({}, {{"tokens", message(1, "\x85")}})}, specs, true),
               0, "tokens", "");
  // Read as an Example, field 2 is unknown: no steps, and the context still decodes.
  auto e = decode({r0}, specs, false);
  CHECK(e.ints(0) == std::vector<int64_t>{7});
  CHECK(e.columns[1].row_splits == (std::vector<int64_t>{0, 0}));
}

// Every prefix and every single-byte change of a record: a ParseError or columns of the right
// shape, never a read outside the record.
TEST(every_byte_cut_or_changed) {
  const std::vector<FieldSpec> specs = {
      var("ints", Kind::kInt64), var("reals", Kind::kFloat), var("strs", Kind::kBytes),
      with_default(raw("raw", 3), std::vector<uint8_t>{1, 2, 3}),
      with_default(fixed("one", Kind::kInt64, 1), std::vector<int64_t>{0})};
  const std::string record = example({{"ints", int64s({1, -1, 300})},
                                      {"reals", floats({1.5f, 2.5f}, false)},
                                      {"strs", strings({"ab", ""})},
                                      {"raw", strings({"xyz"})},
                                      {"one", int64s({42}, false)}});
  auto check_shape = [&](const Decoded& d, const std::string& context) {
    CHECK(d.columns[0].row_splits.size() == 2 && d.columns[0].values.size() % 8 == 0) << context;
    CHECK(d.columns[1].values.size() % 4 == 0) << context;
    CHECK_EQ(d.columns[2].starts.size(), d.columns[2].ends.size()) << context;
    for (size_t j = 0; j < d.columns[2].starts.size(); ++j) {
      CHECK(0 <= d.columns[2].starts[j] && d.columns[2].starts[j] <= d.columns[2].ends[j] &&
            d.columns[2].ends[j] <= int64_t(d.size))
          << context;
    }
    CHECK_EQ(d.columns[3].values.size(), 3u) << context;
    CHECK_EQ(d.columns[4].values.size(), 8u) << context;
  };
  auto whole = decode({record}, specs);
  check_shape(whole, "whole");
  CHECK(whole.ints(4) == std::vector<int64_t>{42});
  size_t errors = 0;
  for (size_t cut = 0; cut < record.size(); ++cut) {
    try {
      check_shape(decode({record.substr(0, cut)}, specs), "cut at " + std::to_string(cut));
    } catch (const tfr::ParseError& e) {
      CHECK_EQ(e.record_index, 0u);
      ++errors;
    }
  }
  CHECK(errors > 0);
  for (size_t at = 0; at < record.size(); ++at) {
    for (int delta : {1, 0x40, 0x80}) {
      std::string changed = record;
      changed[at] = char(uint8_t(changed[at]) + delta);
      try {
        check_shape(decode({changed}, specs), "byte " + std::to_string(at));
      } catch (const tfr::ParseError& e) {
        CHECK_EQ(e.record_index, 0u);
      }
    }
  }
}

// Every column of two decodings, compared whole.
bool same_columns(const Decoded& a, const Decoded& b) {
  if (a.columns.size() != b.columns.size()) return false;
  for (size_t k = 0; k < a.columns.size(); ++k) {
    const Column& x = a.columns[k];
    const Column& y = b.columns[k];
    if (x.values.size() != y.values.size() ||
        (x.values.size() && std::memcmp(x.values.data(), y.values.data(), x.values.size()) != 0) ||
        x.starts != y.starts || x.ends != y.ends || x.row_splits != y.row_splits ||
        x.step_splits != y.step_splits || x.present != y.present) {
      return false;
    }
  }
  return true;
}

TEST(threads_decode_parts_joined_as_one_thread_does) {
  const std::vector<FieldSpec> specs = {
      var("ints", Kind::kInt64),
      var("reals", Kind::kFloat),
      var("strs", Kind::kBytes),
      with_default(raw("raw", 3), std::vector<uint8_t>{1, 2, 3}),
      with_default(fixed("one", Kind::kInt64, 1), std::vector<int64_t>{0}),
      fixed("two", Kind::kBytes, 2)};
  std::mt19937 random(7);
  std::vector<std::string> records;
  for (size_t i = 0; i < 700; ++i) {
    std::vector<std::pair<std::string, std::string>> features;
    const int64_t n = int64_t(random() % 4);
    std::vector<int64_t> ints(size_t(n), int64_t(i) - 300);
    if (random() % 5) features.push_back({"ints", int64s(ints, random() % 2 == 0)});
    if (random() % 5) features.push_back({"reals", floats(std::vector<float>(size_t(n), 0.5f))});
    features.push_back({"strs", strings(std::vector<std::string>(size_t(n), "s"))});
    if (random() % 3) features.push_back({"raw", strings({"abc"})});
    if (random() % 3) features.push_back({"one", int64s({int64_t(i)})});
    features.push_back({"two", strings({"x", std::string(i % 5, 'y')})});
    if (random() % 2) std::swap(features.front(), features.back());
    records.push_back(example(features));
  }
  const Decoded one = decode(records, specs, false, "junk");
  for (size_t threads : {2, 3, 8, 64}) {
    CHECK(same_columns(decode(records, specs, false, "junk", threads), one)) << threads;
  }
  for (size_t n : {0, 1, 2, 5}) {  // fewer records than threads
    const std::vector<std::string> few(records.begin(), records.begin() + long(n));
    CHECK(same_columns(decode(few, specs, false, "", 4), decode(few, specs))) << n;
  }
  // Damage in two places: the first is reported, whichever part meets it.
  records[650] = records[650].substr(0, 5);
  records[123] = example({{"two", strings({"only one"})}});
  for (size_t threads : {1, 2, 5}) {
    std::optional<tfr::ParseError> e =
        check::thrown<tfr::ParseError>([&] { decode(records, specs, false, "", threads); });
    expect_error(e, 123, "two", "has 1 values, the spec asks for 2");
  }
}

// What record i holds for spec k, as one string (numbers as their bytes, bytes values spelled
// out, a default or a missing VarLen marked), from columns decoded in any batch.
std::string row_of(const Decoded& d, const std::vector<FieldSpec>& specs, size_t k, size_t i) {
  const FieldSpec& s = specs[k];
  const Column& c = d.columns[k];
  const auto* data = reinterpret_cast<const char*>(d.data.get());
  auto bytes_value = [&](size_t j) {
    return c.starts[j] < 0
               ? std::string("<default>")
               : "[" + std::string(data + c.starts[j], size_t(c.ends[j] - c.starts[j])) + "]";
  };
  const size_t width = s.kind == Kind::kInt64 ? 8 : 4;
  std::string out;
  if (s.layout == Layout::kRawBytes) {
    return std::string(reinterpret_cast<const char*>(c.values.data()) + i * s.count, s.count);
  }
  if (s.layout == Layout::kFixed) {
    if (s.kind == Kind::kBytes) {
      for (size_t j = i * s.count; j < (i + 1) * s.count; ++j) out += bytes_value(j);
      return out;
    }
    return std::string(reinterpret_cast<const char*>(c.values.data()) + i * s.count * width,
                       s.count * width);
  }
  out = c.present[i] ? "present:" : "missing:";
  for (int64_t j = c.row_splits[i]; j < c.row_splits[i + 1]; ++j) {
    out += s.kind == Kind::kBytes
               ? bytes_value(size_t(j))
               : std::string(reinterpret_cast<const char*>(c.values.data()) + size_t(j) * width,
                             width);
  }
  return out;
}

// Decodes the records as one batch (the learned layout takes the records that repeat the
// first ones' layout) and each alone (the general paths only: a one-record batch never has a
// layout when it is decoded); both must agree on every record, or fail at the same record with the
// same error.
void expect_paths_agree(const std::vector<std::string>& records,
                        const std::vector<FieldSpec>& specs, const std::string& context) {
  std::optional<Decoded> batch;
  std::optional<tfr::ParseError> batch_error;
  try {
    batch = decode(records, specs);
  } catch (const tfr::ParseError& e) {
    batch_error = e;
  }
  for (size_t i = 0; i < records.size(); ++i) {
    std::optional<Decoded> alone;
    try {
      alone = decode({records[i]}, specs);
    } catch (const tfr::ParseError& e) {
      REQUIRE(batch_error) << context << ": record " << i << " alone fails (" << e.what()
                           << ") but not in the batch";
      REQUIRE_EQ(batch_error->record_index, i) << context << ": " << batch_error->what();
      CHECK_EQ(std::string(batch_error->what()), std::string(e.what())) << context;
      CHECK_EQ(batch_error->feature, e.feature) << context;
      return;
    }
    if (batch_error) {
      REQUIRE(batch_error->record_index > i)
          << context << ": the batch fails at record " << batch_error->record_index << " ("
          << batch_error->what() << ") but it decodes alone";
    }
    if (!batch) continue;  // (it fails at a later record)
    for (size_t k = 0; k < specs.size(); ++k) {
      CHECK_EQ(check::show(row_of(*batch, specs, k, i)), check::show(row_of(*alone, specs, k, 0)))
          << context << ": record " << i << ", spec " << specs[k].name;
    }
  }
  CHECK(!batch_error) << context << ": " << (batch_error ? batch_error->what() : "");
}

// Records of a few writers' layouts, with what breaks a layout mixed in: values of other widths,
// empty and missing features, keys in another order or twice, unpacked lists, unknown fields,
// a map entry's value given twice, lengths written in more bytes than needed.
std::vector<std::string> varied_records(std::mt19937& rng, size_t n) {
  std::vector<std::string> out;
  auto pick = [&](size_t k) { return size_t(rng() % k); };
  for (size_t i = 0; i < n; ++i) {
    const bool odd = pick(6) == 0;  // one record in six leaves the usual layout
    std::vector<int64_t> ids(odd ? pick(40) : 1 + pick(4));
    for (int64_t& v : ids) v = pick(3) == 0 ? int64_t(rng()) - (1 << 30) : int64_t(pick(100));
    std::vector<float> box(odd ? pick(9) : 4, 0.25f * float(i % 7));
    std::vector<std::string> words(1 + (odd ? pick(3) : 0),
                                   std::string(pick(odd ? 300 : 9), 'a' + char(i % 26)));
    Entries e = {{"label", int64s({int64_t(odd ? rng() : pick(10))})},
                 {"image", strings({std::string(odd ? 200 + pick(200) : 40, char(i))})},
                 {"score", floats({float(i)})},
                 {"ids", int64s(ids, !(odd && pick(2)))},
                 {"box", floats(box, !(odd && pick(3) == 0))},
                 {"words", strings(words)},
                 {"raw", strings({std::string(6, char('0' + i % 10))})},
                 {"skipped", int64s({1, 2, 3})}};
    if (odd) {
      switch (pick(7)) {
        case 0:
          e.erase(e.begin() + long(pick(e.size())));
          break;  // one missing
        case 1:
          std::swap(e[pick(e.size())], e[pick(e.size())]);
          break;  // reordered
        case 2:
          e.push_back(e[pick(e.size())]);
          break;  // a key twice
        case 3:
          e.push_back({"label", floats({1.0f})});
          break;  // the last of a key wins
        case 4:
          e[pick(e.size())].second += key(9, 0) + varint(7);
          break;  // an unknown field
        case 5:
          e[3].second = message(3, "");
          break;  // an empty list
        case 6:
          e[5].second = "";
          break;  // a Feature with no list
      }
    }
    std::string record = example(e);
    if (odd && pick(8) == 0) {  // an unknown field inside a map entry (its key and value count)
      const size_t at = pick(e.size());
      std::string body;
      for (size_t j = 0; j < e.size(); ++j) {
        const std::string inner =
            j == at ? message(1, e[j].first) + key(7, 0) + varint(300) + message(2, e[j].second)
                    : message(1, e[j].first) + message(2, e[j].second);
        body += message(1, inner);
      }
      record = message(1, body);
    } else if (odd && pick(6) == 0) {  // a map entry's value given twice (protobuf merges them)
      const size_t at = pick(e.size());
      const std::string parts[] = {"", e[pick(e.size())].second, e[at].second, floats({2.5f})};
      std::string body;
      for (size_t j = 0; j < e.size(); ++j) {
        body += j == at ? entry_with_values(e[j].first, {e[j].second, parts[pick(4)]}, pick(3))
                        : message(1, message(1, e[j].first) + message(2, e[j].second));
      }
      record = message(1, body);
    }
    if (odd && pick(8) == 0) record += key(5, 0) + varint(1);  // an unknown Example field
    if (odd && pick(8) == 0) {  // the Features length in one byte more than needed
      const std::string body = map_of(e);
      std::string length = varint(body.size());
      length.back() = char(uint8_t(length.back()) | 0x80);
      record = key(1, 2) + length + '\0' + body;
    }
    out.push_back(record);
  }
  return out;
}

std::vector<FieldSpec> varied_specs() {
  return {fixed("label", Kind::kInt64, 1),
          with_default(fixed("image", Kind::kBytes, 1), std::vector<uint8_t>{}),
          with_default(fixed("score", Kind::kFloat, 1), std::vector<float>{-1.0f}),
          var("ids", Kind::kInt64),
          var("box", Kind::kFloat),
          var("words", Kind::kBytes),
          with_default(raw("raw", 6), std::vector<uint8_t>{1, 2, 3, 4, 5, 6}),
          var("absent", Kind::kFloat)};
}

TEST(the_learned_layout_decodes_as_the_general_paths_do) {
  std::mt19937 rng(11);
  const std::vector<FieldSpec> specs = varied_specs();
  for (int round = 0; round < 40; ++round) {
    expect_paths_agree(varied_records(rng, 60), specs, "round " + std::to_string(round));
  }
  // Long runs of one layout, where values of other widths (label 300, a 200-byte word) come now
  // and then: the layout learned again, and the records in between through the general paths.
  std::vector<std::string> records;
  for (size_t i = 0; i < 400; ++i) {
    records.push_back(example({{"label", int64s({int64_t(i % 50 == 49 ? 300 : i % 10)})},
                               {"score", floats({1.5f})},
                               {"words", strings({std::string(i % 97 == 5 ? 200 : 3, 'w')})},
                               {"image", strings({std::string(50, 'i')})},
                               {"raw", strings({"abcdef"})},
                               {"ids", int64s({int64_t(i), 2, 3})},
                               {"box", floats({1, 2, 3, 4})}}));
  }
  expect_paths_agree(records, specs, "long runs");
}

// A record that repeats the layout but for one byte: the layout misses it or takes it exactly as
// the general paths do, whichever byte it is and however it changes.
TEST(every_byte_changed_after_the_layout_is_learned) {
  const std::vector<FieldSpec> specs = varied_specs();
  std::mt19937 rng(3);
  std::vector<std::string> good;
  for (size_t i = 0; i < 3; ++i) {
    good.push_back(example({{"label", int64s({int64_t(i)})},
                            {"image", strings({std::string(40, 'x')})},
                            {"score", floats({float(i)})},
                            {"ids", int64s({1, 200, 3})},
                            {"box", floats({1, 2, 3, 4})},
                            {"words", strings({"one", "two"})},
                            {"raw", strings({"abcdef"})},
                            {"skipped", int64s({1})}}));
  }
  const std::string& record = good[2];
  for (size_t at = 0; at < record.size(); ++at) {
    for (int delta : {1, 0x40, 0x80, 0xff}) {
      std::string changed = record;
      changed[at] = char(uint8_t(changed[at]) + delta);
      expect_paths_agree({good[0], good[1], changed, good[1]}, specs,
                         "byte " + std::to_string(at) + " + " + std::to_string(delta));
    }
  }
  for (size_t cut = 0; cut < record.size(); ++cut) {
    expect_paths_agree({good[0], good[1], record.substr(0, cut), good[1]}, specs,
                       "cut at " + std::to_string(cut));
  }
}

TEST(feature_kinds_lists_names_in_order_with_their_first_kind) {
  const std::vector<std::string> records = {
      example({{"a", int64s({1})}, {"b", ""}}),
      example({{"b", floats({1.0f})}, {"c", strings({"x"})}, {"a", floats({2.0f})}}),
      "\x0a\x05",  // damaged
      example({{"d", int64s({})}}),
  };
  std::string joined;
  std::vector<int64_t> offsets{0};
  for (const std::string& r : records) {
    joined += r;
    offsets.push_back(int64_t(joined.size()));
  }
  const auto* data = reinterpret_cast<const uint8_t*>(joined.data());
  auto kinds = tfr::feature_kinds(data, offsets.data(), 2, false, true);
  REQUIRE_EQ(kinds.size(), 3u);
  CHECK_EQ(kinds[0].name, std::string("a"));
  CHECK(kinds[0].kind == Kind::kInt64) << "the first kind seen";
  CHECK_EQ(kinds[1].name, std::string("b"));
  CHECK(kinds[1].kind == Kind::kFloat) << "no list first, then a float_list";
  CHECK_EQ(kinds[1].first_record, 0u);
  CHECK_EQ(kinds[2].name, std::string("c"));
  CHECK_EQ(kinds[2].first_record, 1u);
  auto e = check::thrown<tfr::ParseError>(
      [&] { tfr::feature_kinds(data, offsets.data(), 4, false, true); });
  REQUIRE(e) << "strict";
  CHECK_EQ(e->record_index, 2u);
  kinds = tfr::feature_kinds(data, offsets.data(), 4, false, false);
  CHECK_EQ(kinds.size(), 3u) << "not strict: the scan stops before the damaged record";
}

// A key given twice in one record counts by its last entry (protobuf keeps it whole), in the kind
// the scan reports and in what decode_examples then reads with that kind.
TEST(feature_kinds_takes_a_keys_last_entry) {
  const std::vector<std::string> records = {
      example({{"k", int64s({1})}, {"o", strings({"x"})}, {"k", floats({2.5f})}}),
      example({{"k", floats({3.5f})}}),
  };
  std::string joined;
  std::vector<int64_t> offsets{0};
  for (const std::string& r : records) {
    joined += r;
    offsets.push_back(int64_t(joined.size()));
  }
  const auto kinds = tfr::feature_kinds(reinterpret_cast<const uint8_t*>(joined.data()),
                                        offsets.data(), records.size(), false, true);
  REQUIRE_EQ(kinds.size(), 2u);
  CHECK_EQ(kinds[0].name, std::string("k"));
  CHECK(kinds[0].kind == Kind::kFloat) << "the last entry's kind";
  CHECK_EQ(kinds[1].name, std::string("o"));
  auto d = decode(records, {var("k", Kind::kFloat)});
  CHECK(d.reals(0) == (std::vector<float>{2.5f, 3.5f}));
}

RUN_ALL_TESTS()
