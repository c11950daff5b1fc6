// RecordLayout's learning: a record's entries, strictly in the usual forms, as steps and
// signatures.
#include "record_layout.h"

#include <algorithm>

namespace tfr::decoding {

struct RecordLayout::Learned {
  std::vector<Step> steps;
  std::vector<uint64_t> more_signature, more_mask;
  std::vector<uint8_t> seen;  // per spec: the record holds it
};

namespace {

// A varint's width, and its value, at *p (bounded by end): false for a bad one or one over 4
// bytes (a length of 256 MiB or more: left to the general paths).
bool read_length(const uint8_t** p, const uint8_t* end, size_t* width, uint64_t* value) {
  Cursor c{*p, end};
  if (!c.varint(value)) return false;
  *width = size_t(c.p - *p);
  *p = c.p;
  return *width <= 4;
}

// The high bits of a varint of `width` bytes (little-endian word): set in each byte but the last.
void continuation_bits(size_t width, uint64_t* mask, uint64_t* want) {
  *mask = *want = 0;
  for (size_t i = 0; i < width; ++i) {
    *mask |= uint64_t(0x80) << (8 * i);
    if (i + 1 < width) *want |= uint64_t(0x80) << (8 * i);
  }
}

// Marks bytes [at, at + width) of a signature as a length that varies: only their high bits count.
void vary(std::vector<uint8_t>& mask, size_t at, size_t width) {
  for (size_t i = at; i < at + width; ++i) mask[i] = 0x80;
}

}  // namespace

RecordLayout::RecordLayout(const std::vector<FieldSpec>& specs, ColumnFiller& filler,
                           const uint8_t* data_end)
    : specs_(specs),
      filler_(filler),
      data_end_(data_end),
      sized_(specs.size(), 0),
      varied_(specs.size(), 0) {}

bool RecordLayout::learn(Cursor record) {
  if (TFR_BIG_ENDIAN) return false;  // (floats are copied as they are on the wire)
  for (const FieldSpec& s : specs_) {
    if (s.sequence) return false;
  }
  Learned out;
  out.seen.assign(specs_.size(), 0);
  const uint8_t* p = record.p;
  size_t header_width = 0;
  if (p != record.end) {  // [features tag][length] then the entries, to the end
    uint64_t size;
    if (*p++ != kFeaturesTag || !read_length(&p, record.end, &header_width, &size) ||
        size != uint64_t(record.end - p)) {
      return false;
    }
  }
  while (p < record.end) {
    if (!learn_entry(p, record.end, out, &p)) return false;
  }
  std::vector<size_t> absent, present_var;
  for (size_t k = 0; k < specs_.size(); ++k) {
    const FieldSpec& s = specs_[k];
    const bool var = s.layout == Layout::kVar;
    if (out.seen[k]) {
      if (var) present_var.push_back(k);
      continue;
    }
    if (var ? s.required : !s.has_default) return false;  // an error for every such record
    absent.push_back(k);
  }
  header_width_ = header_width;
  uint64_t mask, want;
  continuation_bits(header_width, &mask, &want);
  header_continuation_mask_ = uint32_t(mask);
  header_continuation_want_ = uint32_t(want);
  header_length_mask_ = mask_of(header_width);
  steps_ = std::move(out.steps);
  reach_ = 0;
  for (const Step& s : steps_) reach_ = std::max<size_t>(reach_, 16u * s.chunks);
  more_signature_ = std::move(out.more_signature);
  more_mask_ = std::move(out.more_mask);
  absent_ = std::move(absent);
  present_var_ = std::move(present_var);
  for (const Step& s : steps_) {
    if (s.op == Op::kInt64Sized) sized_[s.k] = uint8_t(s.payload_size);
  }
  learned_ = true;
  return true;
}

bool RecordLayout::signed_beyond(const uint8_t* p, const Step& s) const {
  const uint64_t* sig = more_signature_.data() + s.more_words;
  const uint64_t* mask = more_mask_.data() + s.more_words;
  uint64_t differ = 0;
  for (size_t w = 0; w < 2u * s.chunks - 6; ++w) {
    uint64_t word;
    std::memcpy(&word, p + 48 + 8 * w, 8);
    differ |= (word ^ sig[w]) & mask[w];
  }
  return differ == 0;
}

// One map entry: [entry tag][length] [key tag][key size: 1 byte][key] [value tag][length] value,
// the value filling the entry.
bool RecordLayout::learn_entry(const uint8_t* entry, const uint8_t* end, Learned& out,
                               const uint8_t** next) {
  const uint8_t* p = entry;
  size_t entry_width, value_width;
  uint64_t entry_size, value_size;
  if (*p++ != kEntryTag || !read_length(&p, end, &entry_width, &entry_size) ||
      entry_size > uint64_t(end - p)) {
    return false;
  }
  const uint8_t* const entry_end = p + entry_size;
  if (entry_end - p < 2 || *p++ != kKeyTag || *p >= 0x80) return false;
  const size_t key_size = *p++;
  if (size_t(entry_end - p) < key_size + 1) return false;
  const Cursor key{p, p + key_size};
  p += key_size;
  if (*p++ != kValueTag) return false;
  const size_t value_length_at = size_t(p - entry);
  if (!read_length(&p, entry_end, &value_width, &value_size) ||
      value_size != uint64_t(entry_end - p)) {
    return false;
  }
  int k = -1;
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (!names(specs_[i], false, key)) continue;
    if (k >= 0) return false;  // several specs of one name (the C++ API allows it)
    k = int(i);
  }
  if (k >= 0 && out.seen[size_t(k)]) return false;  // the key twice: the general paths' rules
  Step step{};
  step.op = Op::kSkip;
  step.value_length_width = uint8_t(value_width);
  step.entry_length_width = uint8_t(entry_width);
  step.value_length_at = uint8_t(value_length_at);
  step.value_at = uint8_t(p - entry);
  step.entry_minus_value = uint32_t(entry_size - value_size);
  step.k = k >= 0 ? uint32_t(k) : 0;
  if (k >= 0) {
    const Field& f = filler_.field(size_t(k));
    step.slots = f.slots;
    step.slot_bytes = f.slot_bytes;
    step.ends = f.ends;
    step.column = f.column;
    step.count = f.count;
  }
  // Signed: the bytes up to the value, lengths but for their high bits (unless learn_value signs
  // them whole); read: the lengths' words too.
  std::vector<uint8_t> bytes(entry, p), mask(bytes.size(), 0xff);
  vary(mask, 1, entry_width);
  vary(mask, value_length_at, value_width);
  size_t reads = std::max<size_t>(5, value_length_at + 4);
  if (k >= 0) {
    out.seen[size_t(k)] = 1;
    if (!learn_value(specs_[size_t(k)], size_t(k), entry, entry_end, step, bytes, mask, &reads)) {
      return false;
    }
  }
  step.chunks = uint8_t((std::max(bytes.size(), reads) + 15) / 16);
  bytes.resize(16 * step.chunks, 0);
  mask.resize(16 * step.chunks, 0);
  step.more_words = uint32_t(out.more_signature.size());
  for (size_t w = 0; w < 2u * step.chunks; ++w) {
    uint64_t b, m;
    std::memcpy(&b, bytes.data() + 8 * w, 8);
    std::memcpy(&m, mask.data() + 8 * w, 8);
    if (w < 6) {
      step.signature[w] = b & m;
      step.mask[w] = m;
    } else {
      out.more_signature.push_back(b & m);
      out.more_mask.push_back(m);
    }
  }
  out.steps.push_back(step);
  *next = entry_end;
  return true;
}

// A requested feature's value: [list tag][length] body, in the usual form for its spec.
bool RecordLayout::learn_value(const FieldSpec& spec, size_t k, const uint8_t* entry,
                               const uint8_t* end, Step& step, std::vector<uint8_t>& bytes,
                               std::vector<uint8_t>& mask, size_t* reads) {
  const uint8_t* p = entry + step.value_at;
  if (p == end || *p++ != list_tag(spec.kind)) return false;
  bytes.push_back(list_tag(spec.kind));
  mask.push_back(0xff);
  size_t list_width;
  uint64_t list_size, continuation_mask, continuation_want;
  if (!read_length(&p, end, &list_width, &list_size) || list_size != uint64_t(end - p))
    return false;
  const uint8_t* const body = p;
  step.list_length_width = uint8_t(list_width);
  continuation_bits(list_width, &continuation_mask, &continuation_want);
  step.list_continuation_mask = uint32_t(continuation_mask);
  step.list_continuation_want = uint32_t(continuation_want);
  *reads = std::max<size_t>(*reads, bytes.size() + 4);
  const Handler handler = handler_of(spec);
  if (spec.kind == Kind::kBytes &&
      handler != Handler::kRawBytes) {  // [packed tag][length][bytes]...
    Cursor list{body, end}, value;
    size_t count = 0;
    while (!list.done()) {
      if (!list.next_is(kPackedTag) || !list.sub(&value)) return false;
      ++count;
    }
    if (handler == Handler::kFixedBytes && count != spec.count) return false;
    step.op = handler == Handler::kFixedBytes ? Op::kBytesFixed : Op::kBytesVar;
    if (step.op == Op::kBytesFixed &&
        count == 1) {  // [packed tag][length][bytes]: its length's width
      const uint8_t* at = body + 1;
      size_t width;
      uint64_t size;
      if (!read_length(&at, end, &width, &size)) return true;  // (a value of 256 MiB: the loop)
      step.op = Op::kBytesOne;
      step.payload_length_width = uint8_t(width);
      continuation_bits(width, &continuation_mask, &continuation_want);
      step.payload_continuation_mask = uint32_t(continuation_mask);
      step.payload_continuation_want = uint32_t(continuation_want);
      *reads = std::max(*reads, size_t(body - entry) + 1 + 4);
    }
    return true;
  }
  Cursor payload{body, body};  // numbers, raw bytes: empty, or [packed tag][length] payload
  if (list_size != 0) {
    Cursor list{body, end};
    if (!list.next_is(kPackedTag) || !list.sub(&payload) || !list.done()) return false;
  }
  const size_t payload_size = size_t(payload.end - payload.p);
  std::vector<uint64_t> values(payload_size);
  const size_t count = spec.kind == Kind::kInt64
                           ? decode_varints(payload.p, payload.end, values.data(), payload_size)
                           : payload_size / 4;
  if (count == kBadVarints) return false;
  switch (handler) {
    case Handler::kRawBytes:
      if (list_size == 0 || payload_size != spec.count) return false;
      step.op = Op::kCopy;
      break;
    case Handler::kFixedNumbers:
      if (count != spec.count || (spec.kind == Kind::kFloat && payload_size != 4 * spec.count))
        return false;
      if (spec.kind == Kind::kFloat) {
        step.op = Op::kCopy;
      } else if (spec.count == 1 && payload_size <= 8) {
        if (sized_[k] != 0 && sized_[k] != payload_size) varied_[k] = 1;
        step.op = varied_[k] ? Op::kInt64One : Op::kInt64Sized;
      } else {
        step.op = spec.count == 1 ? Op::kInt64One : Op::kInt64Fixed;
      }
      break;
    case Handler::kVar:
      if (spec.kind == Kind::kFloat && payload_size % 4 != 0) return false;
      step.op = spec.kind == Kind::kFloat ? Op::kFloatVar : Op::kInt64Var;
      return true;
    default:
      return false;
  }
  if (step.op != Op::kCopy && step.op != Op::kInt64Sized) return true;
  // Every length fixed by the payload's size: all of them signed whole, up to the payload.
  const size_t payload_at = size_t(payload.p - entry);
  std::fill(mask.begin(), mask.end(), uint8_t(0xff));
  bytes.assign(entry, payload.p);
  mask.resize(bytes.size(), 0xff);
  step.fixed_size = uint32_t(end - entry);
  step.payload_at = uint32_t(payload_at);
  step.payload_size = uint32_t(payload_size);
  if (step.op == Op::kInt64Sized) {
    continuation_bits(payload_size, &step.int_continuation_mask, &step.int_continuation_want);
    *reads = std::max(*reads, payload_at + 8);
  }
  return true;
}

}  // namespace tfr::decoding
