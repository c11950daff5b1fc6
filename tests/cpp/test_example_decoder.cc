// The Example decoder on hand-built wire bytes: packed and unpacked lists, unknown fields,
// wrong wire types, truncated varints and lengths, kinds that do not match the spec, missing
// features with and without defaults, and the presence column.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "example_decoder.h"

namespace {

using Bytes = std::vector<uint8_t>;
using tfr::Layout;
using tfr::ValueKind;

Bytes varint(uint64_t v) {
  Bytes out;
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    out.push_back(uint8_t(b | (v ? 0x80 : 0)));
  } while (v);
  return out;
}

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

Bytes field(uint32_t number, uint32_t wire, const Bytes& payload) {
  Bytes head = varint(uint64_t(number) << 3 | wire);
  if (wire == 2) head = cat({head, varint(payload.size())});
  return cat({head, payload});
}

Bytes str(const std::string& s) { return Bytes(s.begin(), s.end()); }

// Feature { int64_list { value: packed } }, etc.
Bytes int64_packed(std::initializer_list<uint64_t> values) {
  Bytes packed;
  for (uint64_t v : values) packed = cat({packed, varint(v)});
  return field(3, 2, field(1, 2, packed));
}
Bytes int64_unpacked(std::initializer_list<uint64_t> values) {
  Bytes list;
  for (uint64_t v : values) list = cat({list, field(1, 0, varint(v))});
  return field(3, 2, list);
}
Bytes floats_packed(std::initializer_list<float> values) {
  Bytes packed;
  for (float f : values) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    for (int i = 0; i < 4; ++i) packed.push_back(uint8_t(bits >> (8 * i)));
  }
  return field(2, 2, field(1, 2, packed));
}
Bytes bytes_list(std::initializer_list<std::string> values) {
  Bytes list;
  for (const std::string& v : values) list = cat({list, field(1, 2, str(v))});
  return field(1, 2, list);
}

Bytes entry(const std::string& key, const Bytes& feature) {
  return field(1, 2, cat({field(1, 2, str(key)), field(2, 2, feature)}));
}
Bytes example(std::initializer_list<Bytes> entries) {
  Bytes features;
  for (const Bytes& e : entries) features = cat({features, e});
  return field(1, 2, features);
}

struct Batch {
  Bytes data;
  std::vector<int64_t> offsets{0};
  void add(const Bytes& record) {
    data.insert(data.end(), record.begin(), record.end());
    offsets.push_back(int64_t(data.size()));
  }
  std::vector<tfr::Column> decode(const std::vector<tfr::FieldSpec>& specs) const {
    return tfr::decode_examples(data.data(), offsets.data(), offsets.size() - 1, specs, false);
  }
};

tfr::FieldSpec spec(const std::string& name, ValueKind kind, Layout layout, size_t count = 0) {
  tfr::FieldSpec s;
  s.name = name;
  s.kind = kind;
  s.layout = layout;
  s.count = count;
  return s;
}

std::vector<int64_t> ints(const tfr::Column& c) {
  std::vector<int64_t> out(c.values.size() / 8);
  if (!out.empty()) std::memcpy(out.data(), c.values.data(), c.values.size());
  return out;
}

TEST(packed_and_unpacked_ints_read_alike) {
  Batch b;
  b.add(example({entry("x", int64_packed({1, 300, uint64_t(-5)}))}));
  b.add(example({entry("x", int64_unpacked({7, 8}))}));
  b.add(example({}));
  auto cols = b.decode({spec("x", ValueKind::kInt64, Layout::kVar)});
  CHECK((ints(cols[0]) == std::vector<int64_t>{1, 300, -5, 7, 8}));
  CHECK((cols[0].row_splits == std::vector<int64_t>{0, 3, 5, 5}));
  CHECK((cols[0].present == std::vector<uint8_t>{1, 1, 0}));
}

TEST(floats_and_bytes) {
  Batch b;
  b.add(example({entry("f", floats_packed({1.5f, -2.0f})), entry("s", bytes_list({"ab", ""}))}));
  auto cols = b.decode({spec("f", ValueKind::kFloat, Layout::kFixed, 2),
                        spec("s", ValueKind::kBytes, Layout::kVar)});
  float f[2];
  CHECK(cols[0].values.size() == 8);
  std::memcpy(f, cols[0].values.data(), 8);
  CHECK(f[0] == 1.5f && f[1] == -2.0f);
  CHECK(cols[1].starts.size() == 2);
  CHECK(cols[1].ends[0] - cols[1].starts[0] == 2 && cols[1].ends[1] == cols[1].starts[1]);
  CHECK(std::memcmp(b.data.data() + cols[1].starts[0], "ab", 2) == 0);
}

TEST(unknown_fields_are_skipped) {
  Batch b;
  const Bytes extra = cat({field(7, 0, varint(99)), field(9, 2, str("junk")), field(11, 5,
                                                                                  Bytes(4, 1))});
  b.add(cat({extra, example({entry("x", int64_packed({4}))}), extra}));
  auto cols = b.decode({spec("x", ValueKind::kInt64, Layout::kFixed, 1)});
  CHECK((ints(cols[0]) == std::vector<int64_t>{4}));
}

TEST(missing_features_use_defaults_or_fail) {
  Batch b;
  b.add(example({}));
  auto with_default = spec("x", ValueKind::kInt64, Layout::kFixed, 1);
  with_default.has_default = true;
  with_default.default_value = {9, 0, 0, 0, 0, 0, 0, 0};
  CHECK((ints(b.decode({with_default})[0]) == std::vector<int64_t>{9}));
  EXPECT_THROW(b.decode({spec("x", ValueKind::kInt64, Layout::kFixed, 1)}), tfr::ParseError,
               [](const tfr::ParseError& e) {
                 CHECK(e.record_index == 0 && e.has_feature && e.feature == "x");
               });
  auto required = spec("x", ValueKind::kInt64, Layout::kVar);
  required.required = true;
  EXPECT_THROW(b.decode({required}), tfr::ParseError, [](const tfr::ParseError&) {});
}

TEST(kind_and_count_mismatches) {
  Batch b;
  b.add(example({entry("x", int64_packed({1}))}));
  b.add(example({entry("x", floats_packed({1.0f}))}));
  EXPECT_THROW(b.decode({spec("x", ValueKind::kInt64, Layout::kVar)}), tfr::ParseError,
               [](const tfr::ParseError& e) { CHECK(e.record_index == 1 && e.feature == "x"); });
  Batch c;
  c.add(example({entry("x", int64_packed({1, 2, 3}))}));
  EXPECT_THROW(c.decode({spec("x", ValueKind::kInt64, Layout::kFixed, 2)}), tfr::ParseError,
               [](const tfr::ParseError& e) { CHECK(e.record_index == 0); });
}

TEST(malformed_wire_bytes) {
  const Bytes good = example({entry("x", int64_packed({1, 2}))});
  // every truncation of a valid record fails cleanly (or, at 0 bytes, is an empty Example)
  for (size_t cut = 1; cut < good.size(); ++cut) {
    Batch b;
    b.add(Bytes(good.begin(), good.begin() + long(cut)));
    bool failed = false;
    try {
      b.decode({spec("x", ValueKind::kInt64, Layout::kVar)});
    } catch (const tfr::ParseError& e) {
      failed = true;
      CHECK(e.record_index == 0);
    }
    CHECK_MSG(failed, "cut at " + std::to_string(cut));
  }
  Batch wire;  // a group (wire type 3) where a message is expected
  wire.add(field(1, 3, {}));
  EXPECT_THROW(wire.decode({spec("x", ValueKind::kInt64, Layout::kVar)}), tfr::ParseError,
               [](const tfr::ParseError& e) { CHECK(!e.has_feature); });
  Batch varint_overlong;  // a varint of 11 bytes
  varint_overlong.add(cat({Bytes{0x08}, Bytes(10, 0xff), Bytes{0x01}}));
  EXPECT_THROW(varint_overlong.decode({spec("x", ValueKind::kInt64, Layout::kVar)}),
               tfr::ParseError, [](const tfr::ParseError&) {});
}

TEST(feature_kinds_scan) {
  Batch b;
  b.add(example({entry("a", int64_packed({1})), entry("empty", Bytes{})}));
  b.add(example({entry("b", bytes_list({"z"})), entry("a", int64_packed({2}))}));
  auto kinds = tfr::feature_kinds(b.data.data(), b.offsets.data(), 2, false, true);
  CHECK(kinds.size() == 3);
  if (kinds.size() == 3) {
    CHECK(kinds[0].name == "a" && kinds[0].kind == int(ValueKind::kInt64));
    CHECK(kinds[1].name == "empty" && kinds[1].kind == tfr::FeatureKind::kNoList);
    CHECK(kinds[2].name == "b" && kinds[2].kind == int(ValueKind::kBytes) &&
          kinds[2].first_record == 1);
  }
}

}  // namespace

CHECK_MAIN
