// The decoder's per-feature plan and its error messages.
#include "decode_plan.h"

#include <new>
#include <stdexcept>

namespace tfr::decoding {
namespace {

const char* list_name(Kind kind) {
  switch (kind) {
    case Kind::kInt64:
      return "an int64_list";
    case Kind::kFloat:
      return "a float_list";
    case Kind::kBytes:
      return "a bytes_list";
    case Kind::kFeature:
      break;
  }
  return "?";
}

[[noreturn]] void bad_spec(const FieldSpec& s, const std::string& what) {
  throw std::invalid_argument("spec of feature '" + s.name + "': " + what);
}

}  // namespace

size_t bytes_per_record(const FieldSpec& s) {
  const size_t size = s.layout == Layout::kRawBytes ? 1
                      : s.kind == Kind::kBytes      ? sizeof(int64_t)
                                                    : value_size(s.kind);
  if (s.count > SIZE_MAX / size) throw std::bad_alloc();
  return s.count * size;
}

void check_spec(const FieldSpec& s) {
  if (s.kind != Kind::kBytes && s.kind != Kind::kFloat && s.kind != Kind::kInt64) {
    bad_spec(s,
             std::string("kind ") + kind_name(s.kind) + " is no list (use bytes, float or int64)");
  }
  if (s.layout != Layout::kFixed && s.layout != Layout::kVar && s.layout != Layout::kRawBytes) {
    bad_spec(s, "unknown layout");
  }
  if (s.layout == Layout::kRawBytes && s.kind != Kind::kBytes)
    bad_spec(s, "raw bytes read a bytes list");
  if (s.layout == Layout::kRawBytes && s.sequence)
    bad_spec(s, "a feature list cannot be read as raw bytes");
  if (!s.has_default) return;
  if (s.sequence || s.layout == Layout::kVar)
    bad_spec(s, "only a fixed-size feature has a default");
  const size_t want = s.layout == Layout::kRawBytes ? s.count
                      : s.kind == Kind::kBytes      ? s.default_value.size()  // one value, any size
                                                    : s.count * value_size(s.kind);
  if (s.default_value.size() != want) {
    bad_spec(s, "a default of " + std::to_string(s.default_value.size()) + " bytes, " +
                    std::to_string(want) + " needed");
  }
}

std::vector<Field> plan_fields(const std::vector<FieldSpec>& specs,
                               const std::vector<Column*>& columns) {
  std::vector<Field> fields;
  fields.reserve(specs.size());
  for (size_t k = 0; k < specs.size(); ++k) {
    const FieldSpec& s = specs[k];
    const Handler handler = handler_of(s);
    Column& c = *columns[k];
    const bool pairs = handler == Handler::kFixedBytes;
    uint8_t* slots = pairs ? reinterpret_cast<uint8_t*>(c.starts.data()) : c.values.data();
    fields.push_back(Field{handler, s.kind, list_tag(s.kind), s.count,
                           in_slots(s) ? bytes_per_record(s) : 0, slots,
                           pairs ? c.ends.data() : nullptr, &c});
  }
  return fields;
}

void RecordErrors::malformed(const char* what) const {
  throw ParseError(index, false, "",
                   std::string("not a valid tf.train.") +
                       (sequences_ ? "SequenceExample: " : "Example: ") + what);
}

void RecordErrors::wrong(size_t k, const std::string& what) const {
  throw ParseError(index, true, specs_[k].name, what);
}

void RecordErrors::wrong_kind(size_t k, Kind kind) const {
  wrong(k, std::string("holds ") + list_name(kind) + ", the spec asks for " +
               list_name(specs_[k].kind));
}

void RecordErrors::wrong_count(size_t k, size_t count) const {
  wrong(k, "has " + std::to_string(count) + " values, the spec asks for " +
               std::to_string(specs_[k].count));
}

void RecordErrors::wrong_step_count(size_t k, int64_t step, size_t count) const {
  wrong(k, "step " + std::to_string(step) + " has " + std::to_string(count) +
               " values, the spec asks for " + std::to_string(specs_[k].count));
}

void RecordErrors::wrong_raw_values(size_t k, size_t count) const {
  wrong(k, "has " + std::to_string(count) + " bytes values, the spec asks for 1");
}

void RecordErrors::wrong_raw_size(size_t k, size_t size) const {
  wrong(k, "holds " + std::to_string(size) + " bytes, the spec's shape and dtype need " +
               std::to_string(specs_[k].count));
}

}  // namespace tfr::decoding
