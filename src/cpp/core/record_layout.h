// The learned byte layout of a writer's records (internal to the Example decoder): the fast path.
//
// A writer lays every record out the same way: the same keys in the same order, each entry with
// the same tags and lengths of the same widths, the values of a fixed-size feature even at the
// same offsets. RecordLayout learns that from one record: for each map entry, its bytes up to
// where the record's own values begin (entry tag, key tag, key, value tag, the list tag of a
// requested feature, and every length that cannot vary: all of them for a float or raw-bytes
// feature of fixed size, or an int64 whose value had the same width so far), signed as 16-byte
// words and masks; the lengths that vary keep only their continuation bits in the signature, so
// their widths are checked by the same compare. A later record is then checked entry by entry with
// word compares, its lengths read at known places with known widths and checked against each
// other, and its values taken where they are: fixed-size numbers and raw bytes written straight
// into the record's slot, packed int64s decoded many at a time. Any difference (another key,
// order, width or form, an unknown field, a value cut short, a count the spec refuses) makes
// decode() return false, and the record goes to the general paths, which decode it from scratch:
// the layout never changes what a record decodes to.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "column_filler.h"
#include "decode_plan.h"
#include "varint_internal.h"

namespace tfr::decoding {

class RecordLayout {
 public:
  // `data_end`: the end of the batch's records, how far a word compare may read.
  RecordLayout(const std::vector<FieldSpec>& specs, ColumnFiller& filler, const uint8_t* data_end);

  bool learned() const { return learned_; }

  // Learns the layout of `record`, a record the general paths decoded without error; false (the
  // layout kept as it was) when it has none the fast path takes (an unusual encoding, a
  // SequenceExample).
  bool learn(Cursor record);

  // Decodes a record laid out as learned into the columns (the filler's current record); false
  // at the first difference, having appended at most part of the record to the VarLen columns
  // (undo() takes that back).
  TFR_INLINE bool decode(Cursor record) {
    const uint8_t* p = record.p;
    const uint8_t* const end = record.end;
    if (header_width_ != 0) {
      if (data_end_ - p < 5 || p[0] != kFeaturesTag) return false;
      size_t size;
      if (!checked_length(p + 1, header_width_, header_continuation_mask_,
                          header_continuation_want_, &size) ||
          size != size_t(end - p) - 1 - header_width_) {
        return false;
      }
      p += 1 + header_width_;
    } else if (p != end) {
      return false;
    }
    // Every word a step compares lies within its reach of where it starts, at most the record's
    // end: a record that far from the batch's end needs no bound check per step.
    const bool near_end = size_t(data_end_ - end) < reach_;
    return near_end ? decode_entries<true>(p, end) : decode_entries<false>(p, end);
  }

  // Takes back what a decode() that returned false appended to the current record's columns.
  void undo() {
    for (size_t k : present_var_) filler_.undo_record(k);
  }

 private:
  // What a step does with its entry's value.
  enum class Op : uint8_t {
    kSkip,        // a feature not asked for
    kCopy,        // fixed-size floats or raw bytes: the payload, at a known place, into the slot
    kInt64Sized,  // one int64 of a known width, at a known place
    kInt64One,    // one int64 of any width
    kInt64Fixed,  // `count` int64s
    kInt64Var,    // VarLen int64s
    kFloatVar,    // VarLen floats
    kBytesOne,    // one bytes value (FixedLen of shape ())
    kBytesFixed,  // `count` bytes values
    kBytesVar,    // VarLen bytes values
  };

  // One map entry of the layout, and where its values go.
  struct Step {
    Op op;
    uint8_t chunks;              // 16-byte words signed (and readable) from the entry's tag
    uint8_t entry_length_width;  // bytes of the entry's length, after its tag
    uint8_t value_length_at;     // where the value's length starts (from the entry's tag)
    uint8_t value_length_width;
    uint8_t value_at;              // where the value starts
    uint8_t list_length_width;     // list ops: the bytes of the list's length
    uint8_t payload_length_width;  // kBytesOne: of its value's length
    uint32_t list_continuation_mask, list_continuation_want;  // their bytes' high bits
    uint32_t payload_continuation_mask, payload_continuation_want;
    uint32_t entry_minus_value;  // the entry's length less its value's: the key and the widths
    uint32_t fixed_size;         // kCopy, kInt64Sized: the whole entry (0: lengths vary)
    uint32_t payload_at;         // kCopy, kInt64Sized: where the payload starts
    uint32_t payload_size;       // kCopy, kInt64Sized: its bytes
    uint64_t int_continuation_mask, int_continuation_want;  // kInt64Sized: its bytes' high bits
    uint32_t k;                                             // the spec
    uint32_t more_words;  // chunks past the third: their words in more_signature_
    // Where its values go (the filler's plan of spec k).
    uint8_t* slots;
    size_t slot_bytes;
    int64_t* ends;
    Column* column;
    size_t count;
    uint64_t signature[6], mask[6];  // the first three chunks (keys up to ~30 bytes)
  };

  static TFR_INLINE uint32_t load32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return TFR_BIG_ENDIAN ? byteswap32(v) : v;
  }

  // The low 7 bits of each of a little-endian word's four bytes, packed: a varint's value once
  // masked to its width.
  static TFR_INLINE size_t seven_bits(uint32_t x) {
    return (x & 0x7fu) | ((x >> 1) & 0x3f80u) | ((x >> 2) & 0x1fc000u) | ((x >> 3) & 0xfe00000u);
  }

  static uint32_t mask_of(size_t width) {
    return width >= 4 ? 0x0fffffffu : (uint32_t(1) << (7 * width)) - 1;
  }

  // A length of a known width (1 to 4) whose continuation bits the signature has checked.
  static TFR_INLINE size_t length_at(const uint8_t* p, size_t width) {
    if (width == 1) return p[0];
    if (width == 2) return size_t(p[0] & 0x7f) | size_t(p[1]) << 7;
    return seven_bits(load32(p)) & mask_of(width);
  }

  // A length of a known width that the signature has not checked: false for another width.
  static TFR_INLINE bool checked_length(const uint8_t* p, size_t width, uint32_t continuation_mask,
                                        uint32_t continuation_want, size_t* out) {
    if (width == 1) {
      *out = p[0];
      return p[0] < 0x80;
    }
    if (width == 2) {
      *out = size_t(p[0] & 0x7f) | size_t(p[1]) << 7;
      return (p[0] & 0x80) != 0 && p[1] < 0x80;
    }
    const uint32_t word = load32(p);
    if ((word & continuation_mask) != continuation_want) return false;
    *out = seven_bits(word) & mask_of(width);
    return true;
  }

  TFR_INLINE bool signed_here(const uint8_t* p, const Step& s) const {
    uint64_t w[6];
    std::memcpy(w, p, 16);
    uint64_t differ = ((w[0] ^ s.signature[0]) & s.mask[0]) | ((w[1] ^ s.signature[1]) & s.mask[1]);
    if (s.chunks == 1) return differ == 0;
    std::memcpy(w + 2, p + 16, 16);
    differ |= ((w[2] ^ s.signature[2]) & s.mask[2]) | ((w[3] ^ s.signature[3]) & s.mask[3]);
    if (s.chunks == 2) return differ == 0;
    std::memcpy(w + 4, p + 32, 16);
    differ |= ((w[4] ^ s.signature[4]) & s.mask[4]) | ((w[5] ^ s.signature[5]) & s.mask[5]);
    if (s.chunks == 3) return differ == 0;
    return differ == 0 && signed_beyond(p, s);
  }

  bool signed_beyond(const uint8_t* p, const Step& s) const;

  template <bool kCheckBounds>
  TFR_INLINE bool decode_entries(const uint8_t* p, const uint8_t* const end) {
    const size_t row = filler_.index();
    for (const Step& s : steps_) {
      if (kCheckBounds && size_t(data_end_ - p) < 16u * s.chunks) return false;
      if (!signed_here(p, s)) return false;
      const size_t left = size_t(end - p);
      if (s.fixed_size != 0) {  // every length signed: the entry's size is known
        if (s.fixed_size > left) return false;
        if (s.op == Op::kCopy) {
          uint8_t* slot = s.slots + row * s.slot_bytes;
          if (s.payload_size == 4) {
            std::memcpy(slot, p + s.payload_at, 4);
          } else if (s.payload_size != 0) {  // (a shape of no values has no slots: null)
            std::memcpy(slot, p + s.payload_at, s.payload_size);
          }
        } else {  // kInt64Sized: a varint of a known width at a known place
          const uint64_t word = varints::load_le64(p + s.payload_at);
          if ((word & s.int_continuation_mask) != s.int_continuation_want) return false;
          const uint64_t v =
              s.payload_size == 1 ? word & 0x7f : varints::pack7(word, s.payload_size);
          std::memcpy(s.slots + row * 8, &v, 8);
        }
        p += s.fixed_size;
        continue;
      }
      const size_t entry_size = length_at(p + 1, s.entry_length_width);
      const size_t value_size = length_at(p + s.value_length_at, s.value_length_width);
      const size_t header = 1 + size_t(s.entry_length_width);
      if (entry_size - value_size != s.entry_minus_value || left < header ||
          entry_size > left - header) {
        return false;
      }
      const uint8_t* const next = p + header + entry_size;
      if (s.op != Op::kSkip && !fill(s, row, p + s.value_at, value_size, next)) return false;
      p = next;
    }
    if (p != end) return false;
    for (size_t k : absent_) filler_.fill_missing(k);
    for (size_t k : present_var_) filler_.end_var_record(k, true);
    return true;
  }

  // The value of a requested feature whose lengths vary into its column: `value` (its list tag
  // checked by the signature) of `value_size` bytes, ending at `next`.
  TFR_INLINE bool fill(const Step& s, size_t row, const uint8_t* value, size_t value_size,
                       const uint8_t* next) {
    size_t list_size;
    if (!checked_length(value + 1, s.list_length_width, s.list_continuation_mask,
                        s.list_continuation_want, &list_size) ||
        list_size + 1 + s.list_length_width != value_size) {
      return false;
    }
    const uint8_t* body = value + 1 + s.list_length_width;
    switch (s.op) {
      case Op::kBytesOne: {  // [packed tag][length][bytes], filling the list
        size_t size;
        if (body[0] != kPackedTag ||
            !checked_length(body + 1, s.payload_length_width, s.payload_continuation_mask,
                            s.payload_continuation_want, &size) ||
            size + 1 + s.payload_length_width != list_size) {
          return false;
        }
        const int64_t start = body + 1 + s.payload_length_width - filler_.data();
        std::memcpy(s.slots + row * 8, &start, 8);
        s.ends[row] = start + int64_t(size);
        return true;
      }
      case Op::kBytesFixed:
      case Op::kBytesVar:
        return fill_bytes(s, row, body, next);
      default:
        break;
    }
    Cursor payload{body, body};
    if (list_size != 0) {  // [packed tag][length] payload, filling the list
      Cursor list{body, next};
      if (!list.next_is(kPackedTag) || !list.sub(&payload) || !list.done()) return false;
    }
    switch (s.op) {
      case Op::kInt64One: {
        uint64_t v;
        if (!payload.varint(&v) || !payload.done()) return false;
        std::memcpy(s.slots + row * 8, &v, 8);
        return true;
      }
      case Op::kInt64Fixed:
        return decode_varints(payload.p, payload.end,
                              reinterpret_cast<uint64_t*>(s.slots + row * s.slot_bytes),
                              s.count) == s.count;
      case Op::kInt64Var: {
        const size_t bytes = size_t(payload.end - payload.p);
        ByteBuffer& values = s.column->values;
        const size_t n = decode_varints(
            payload.p, payload.end, reinterpret_cast<uint64_t*>(values.grow_for(bytes * 8)), bytes);
        if (n == kBadVarints) return false;
        values.resize(values.size() + n * 8);
        return true;
      }
      case Op::kFloatVar: {
        const size_t bytes = size_t(payload.end - payload.p);
        if (bytes % 4 != 0) return false;
        ByteBuffer& values = s.column->values;
        copy_bytes(values.grow_for(bytes), payload.p, bytes);
        values.resize(values.size() + bytes);
        return true;
      }
      default:
        return false;
    }
  }

  // A bytes list's values: [packed tag][length][bytes] each, up to `next`.
  TFR_INLINE bool fill_bytes(const Step& s, size_t row, const uint8_t* body, const uint8_t* next) {
    const uint8_t* data = filler_.data();
    Cursor list{body, next}, value;
    if (s.op == Op::kBytesFixed) {
      int64_t* starts = reinterpret_cast<int64_t*>(s.slots) + row * s.count;
      int64_t* ends = s.ends + row * s.count;
      for (size_t i = 0; i < s.count; ++i) {
        if (!list.next_is(kPackedTag) || !list.sub(&value)) return false;
        starts[i] = value.p - data;
        ends[i] = value.end - data;
      }
      return list.done();
    }
    Column& col = *s.column;
    while (!list.done()) {
      if (!list.next_is(kPackedTag) || !list.sub(&value)) return false;
      col.starts.push_back(value.p - data);
      col.ends.push_back(value.end - data);
    }
    return true;
  }

  // What learn() builds, taken as the layout only when the whole record fits.
  struct Learned;
  bool learn_entry(const uint8_t* entry, const uint8_t* end, Learned& out, const uint8_t** next);
  bool learn_value(const FieldSpec& spec, size_t k, const uint8_t* entry, const uint8_t* end,
                   Step& step, std::vector<uint8_t>& bytes, std::vector<uint8_t>& mask,
                   size_t* reads);

  const std::vector<FieldSpec>& specs_;
  ColumnFiller& filler_;
  const uint8_t* data_end_;
  bool learned_ = false;
  // The record's header: [features tag][length of header_width_ bytes] (0: an empty record).
  size_t header_width_ = 0;
  uint32_t header_continuation_mask_ = 0, header_continuation_want_ = 0, header_length_mask_ = 0;
  std::vector<Step> steps_;
  size_t reach_ = 0;  // the most bytes a step's words reach from its start
  std::vector<uint64_t> more_signature_, more_mask_;  // the steps' chunks past their third
  std::vector<size_t> absent_;                        // requested features the layout lacks
  std::vector<size_t> present_var_;  // VarLen features it holds (a row to end, or to undo)
  // Per spec, for learning: the width of its int64 in the last layout (kInt64Sized), and whether
  // a record showed another (then any width: kInt64One).
  std::vector<uint8_t> sized_, varied_;
};

}  // namespace tfr::decoding
