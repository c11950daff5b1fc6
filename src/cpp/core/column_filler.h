// Value filling (internal to the Example decoder): writes the values one record holds for each
// requested feature into that feature's column. Fixed-size features go straight to the record's
// slot of the batch's column (its values, or its starts and ends for bytes); every other column
// is appended to. The usual Feature (one list of the spec's kind holding one value field) is
// filled inline from its payload; any other Feature goes through protobuf's full rules (packed
// and unpacked values, lists repeated or switched, unknown fields), which also find and report
// what is wrong.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "decode_plan.h"
#include "value_sinks.h"
#include "varint_decode.h"

namespace tfr::decoding {

class ColumnFiller {
 public:
  // `columns`: the batch's for features in slots, the part's for the others; `first`: the first
  // record of the part (the columns appended to hold rows from there on).
  ColumnFiller(const uint8_t* data, const std::vector<FieldSpec>& specs,
               const std::vector<Column*>& columns, size_t first, const RecordErrors& errors)
      : data_(data),
        specs_(specs),
        fields_(plan_fields(specs, columns)),
        first_(first),
        errors_(errors) {}

  const Field& field(size_t k) const { return fields_[k]; }
  const uint8_t* data() const { return data_; }

  // The record whose values come next (the index in the batch: its slots, its errors).
  void start_record(size_t index) { index_ = index; }
  size_t index() const { return index_; }

  // The usual Feature of column k, straight into the record's slot (fixed size) or appended
  // (VarLen), inline; false (nothing written) for anything else, which fill_feature then takes.
  TFR_INLINE bool fill_usual_feature(size_t k, Cursor feature) {
    Cursor payload;
    return usual_payload(feature, fields_[k].list_tag, &payload) && fill_payload(k, payload);
  }

  // The same, given the usual Feature's payload.
  TFR_INLINE bool fill_payload(size_t k, Cursor payload) {
    const Field& f = fields_[k];
    uint8_t* slot = f.slots + index_ * f.slot_bytes;
    switch (f.handler) {
      case Handler::kFixedNumbers:
        return usual_numbers(f, payload, slot);
      case Handler::kFixedBytes: {
        if (f.count != 1) return false;
        f.ends[index_] = payload.end - data_;
        const int64_t start = payload.p - data_;
        std::memcpy(slot, &start, sizeof(start));
        return true;
      }
      case Handler::kRawBytes:
        if (size_t(payload.end - payload.p) != f.count) return false;
        if (f.count != 0) std::memcpy(slot, payload.p, f.count);
        return true;
      case Handler::kVar:
        if (f.kind == Kind::kBytes) {
          f.column->starts.push_back(payload.p - data_);  // the one bytes value
          f.column->ends.push_back(payload.end - data_);
        } else if (!usual_var_numbers(k, f, payload)) {
          return false;
        }
        end_var_record(k, true);
        return true;
      case Handler::kSequence:
        break;
    }
    return false;
  }

  // Any Feature message (a FeatureList for a sequence column) of column k, by protobuf's rules
  // (given in several parts: merged); throws the record's ParseError for what does not fit the
  // spec.
  void fill_feature(size_t k, const EntryValue& feature);
  void fill_feature(size_t k, Cursor feature) {
    fill_feature(k, EntryValue{feature, {nullptr, nullptr}});
  }

  // A record without feature k: its default, an empty row, no steps; or the error.
  void fill_missing(size_t k);

  // Ends a VarLen record of column k (present: it held the feature). Its row_splits and present
  // have a place for each record of the part already (see size_var_rows).
  TFR_INLINE void end_var_record(size_t k, bool present) {
    Column& col = *fields_[k].column;
    const size_t row = index_ - first_;
    col.row_splits[row + 1] = int64_t(values_in(col, fields_[k].kind));
    col.present[row] = uint8_t(present);
  }

  // Takes back what was appended to column k for the current record (the records before it each
  // left exactly one row). Slots need nothing: they are written again.
  void undo_record(size_t k);

  // The usual Feature: one list of the kind asked for (`list_tag`) holding one value field:
  // packed numbers, or one bytes value. Its payload.
  static TFR_INLINE bool usual_payload(Cursor feature, uint8_t list_tag, Cursor* payload) {
    // Under 128 bytes, both lengths are one byte: [list_tag][n - 2] [kPackedTag][n - 4] payload.
    const uint8_t* q = feature.p;
    const size_t n = size_t(feature.end - q);
    if (n >= 4 && n < 0x80 && q[0] == list_tag && q[1] == n - 2 && q[2] == kPackedTag &&
        q[3] == n - 4) {
      *payload = Cursor{q + 4, feature.end};
      return true;
    }
    Cursor list;
    return feature.next_is(list_tag) && feature.sub(&list) && feature.done() &&
           list.next_is(kPackedTag) && list.sub(payload) && list.done();
  }

 private:
  // Exactly f.count packed numbers into a fixed-size slot; false for anything else (the general
  // path then says what is wrong, or takes what is unusual but right).
  static TFR_INLINE bool usual_numbers(const Field& f, Cursor payload, uint8_t* out) {
    if (f.kind == Kind::kFloat) {
      if (size_t(payload.end - payload.p) != f.slot_bytes || TFR_BIG_ENDIAN) return false;
      // Little-endian wire = host. One float, the usual, is copied inline (a memcpy of a size
      // known only at run time is a call into libc).
      if (f.slot_bytes == 4) {
        std::memcpy(out, payload.p, 4);
      } else if (f.slot_bytes != 0) {
        std::memcpy(out, payload.p, f.slot_bytes);
      }
      return true;
    }
    if (f.count == 1) {  // one value, the usual: inline
      uint64_t v;
      if (!payload.varint(&v) || !payload.done()) return false;
      std::memcpy(out, &v, 8);
      return true;
    }
    return decode_varints(payload.p, payload.end, reinterpret_cast<uint64_t*>(out), f.count) ==
           f.count;
  }

  // Packed numbers appended to a VarLen column (true), or nothing done (false: unusual).
  bool usual_var_numbers(size_t k, const Field& f, Cursor payload) {
    NumberAppender sink{f.column->values};
    if (f.kind == Kind::kInt64) {
      packed_int64s(k, payload, sink);
      return true;
    }
    if (TFR_BIG_ENDIAN || (payload.end - payload.p) % 4 != 0) return false;
    sink.put_floats(payload.p, size_t(payload.end - payload.p) / 4);
    return true;
  }

  template <typename Sink>
  void packed_int64s(size_t k, Cursor packed, Sink& sink) {
    const size_t bytes = size_t(packed.end - packed.p);
    size_t room;
    uint64_t* out = sink.int64s_out(bytes, &room);  // at most one value per byte
    const size_t n = decode_varints(packed.p, packed.end, out, room);
    if (n != kBadVarints) return sink.taken(n);
    uint64_t v;  // value by value: counts them all (a slot keeps the first), finds what is bad
    while (!packed.done()) {
      if (!packed.varint(&v)) errors_.wrong(k, "a truncated int64 in a packed list");
      sink.put(v);
    }
  }

  template <typename Sink>
  void packed_floats(size_t k, Cursor packed, Sink& sink) {
    if ((packed.end - packed.p) % 4 != 0) errors_.wrong(k, "a bad packed float list");
#if TFR_BIG_ENDIAN
    for (const uint8_t* q = packed.p; q < packed.end; q += 4) sink.put(load_le32(q));
#else
    sink.put_floats(packed.p, size_t(packed.end - packed.p) / 4);  // little-endian wire = host
#endif
  }

  template <typename F>
  bool feature_lists(size_t k, const EntryValue& feature, Kind* kind, F each_list);
  void check_replaced_list(size_t k, uint32_t list_field, Cursor list) const;
  template <typename Sink>
  void append_values(size_t k, Cursor list, Sink& sink);
  template <typename Sink>
  void append_floats(size_t k, uint32_t wire_type, Cursor& list, Sink& sink);
  template <typename Sink>
  void append_int64s(size_t k, uint32_t wire_type, Cursor& list, Sink& sink);
  template <typename Sink>
  void feature_values(size_t k, const EntryValue& feature, Sink& sink);
  size_t append_feature(size_t k, const EntryValue& feature, Column& col);
  void fill_raw_bytes(size_t k, const EntryValue& feature);
  void fill_sequence(size_t k, const EntryValue& list);
  void fill_default(size_t k, uint8_t* slot) const;
  void check_count(size_t k, size_t count) const {
    if (count != specs_[k].count) errors_.wrong_count(k, count);
  }

  // The current record's slots of a fixed-size bytes column.
  BytesSlot bytes_slot(const Field& f) const {
    const size_t first = index_ * f.count;
    return BytesSlot{reinterpret_cast<int64_t*>(f.slots) + first, f.ends + first, f.count};
  }

  static size_t values_in(const Column& col, Kind kind) {
    return kind == Kind::kBytes ? col.starts.size() : col.values.size() / value_size(kind);
  }

  const uint8_t* data_;
  const std::vector<FieldSpec>& specs_;
  std::vector<Field> fields_;
  size_t first_;
  const RecordErrors& errors_;
  size_t index_ = 0;
};

}  // namespace tfr::decoding
