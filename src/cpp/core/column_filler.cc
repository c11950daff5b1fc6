// ColumnFiller's general paths: any Feature by protobuf's rules, missing features, sequences.
#include "column_filler.h"

namespace tfr::decoding {

// Reads one Feature: which list it holds and hands each of its list messages to `each_list`.
// Protobuf semantics: setting another member of the oneof clears the list, while repeating the
// same member merges (appends) it. So the lists that count are the run of the kind set last,
// starting after the last switch to it. A Feature in several parts (a map entry's value given
// more than once) is read as their bytes one after the other, as protobuf merges them.
template <typename F>
bool ColumnFiller::feature_lists(size_t k, const EntryValue& feature, Kind* kind, F each_list) {
  uint32_t field, wire_type, last = 0;
  if (!feature.merged()) {  // The usual Feature holds exactly one list: take it in a single pass.
    Cursor c = feature.value, list;
    if (c.tag(&field, &wire_type) && wire_type == wire::kLengthDelimited &&
        field >= wire::kBytesList && field <= wire::kInt64List && c.sub(&list) && c.done()) {
      *kind = list_kind_of(field);
      each_list(list);
      return true;
    }
  }
  const uint8_t* run_start = nullptr;  // where the current run of `last` lists begins
  bool replaced = false;               // whether lists of another kind came before the run
  feature.each_part([&](Cursor part) {
    for (Cursor c = part; !c.done();) {
      const uint8_t* at = c.p;
      if (!c.tag(&field, &wire_type)) errors_.wrong(k, "a bad field tag in its Feature");
      if (wire_type == wire::kLengthDelimited && field >= wire::kBytesList &&
          field <= wire::kInt64List && field != last) {
        replaced = last != 0;
        last = field;
        run_start = at;
      }
      if (!c.skip(wire_type)) errors_.wrong(k, "a truncated Feature");
    }
  });
  if (last == 0) return false;
  *kind = list_kind_of(last);
  if (replaced) {  // protobuf parses the lists the run replaces all the same: they must be sound
    feature.each_part([&](Cursor part) {
      if (part.p >= run_start) return;
      if (part.end > run_start) part.end = run_start;  // a field boundary
      for (Cursor c = part; !c.done();) {              // validated by the first pass
        Cursor list;
        c.tag(&field, &wire_type);
        if (wire_type != wire::kLengthDelimited) {
          c.skip(wire_type);
        } else if (c.sub(&list) && field >= wire::kBytesList && field <= wire::kInt64List) {
          check_replaced_list(k, field, list);
        }
      }
    });
  }
  feature.each_part([&](Cursor part) {  // the parts (in order in the entry) from the run on
    if (part.end <= run_start) return;
    if (part.p < run_start) part.p = run_start;
    for (Cursor c = part; !c.done();) {  // validated by the first pass
      Cursor list;
      c.tag(&field, &wire_type);
      if (wire_type != wire::kLengthDelimited) {
        c.skip(wire_type);
      } else if (c.sub(&list) && field == last) {
        each_list(list);
      }
    }
  });
  return true;
}

// A list that a later list of another kind replaces: its values are dropped, but protobuf reads
// it as it does any list, so what it rejects there is rejected here (a value of another wire
// type is an unknown field to it).
void ColumnFiller::check_replaced_list(size_t k, uint32_t list_field, Cursor list) const {
  uint32_t field, wire_type;
  while (!list.done()) {
    Cursor packed;
    if (!list.tag(&field, &wire_type)) errors_.wrong(k, "a bad field tag in a replaced value list");
    if (field != wire::kListValue || wire_type != wire::kLengthDelimited ||
        list_field == wire::kBytesList) {
      if (!list.skip(wire_type)) errors_.wrong(k, "a truncated replaced value list");
    } else if (!list.sub(&packed)) {
      errors_.wrong(k, "a truncated replaced value list");
    } else if (list_field == wire::kFloatList) {
      if ((packed.end - packed.p) % 4 != 0) errors_.wrong(k, "a bad packed float list");
    } else {
      for (uint64_t v; !packed.done();) {
        if (!packed.varint(&v)) errors_.wrong(k, "a truncated int64 in a packed list");
      }
    }
  }
}

// Hands the values of list message `list` (of the spec's kind) to `sink`.
template <typename Sink>
void ColumnFiller::append_values(size_t k, Cursor list, Sink& sink) {
  constexpr uint8_t kUnpackedInt64Tag = wire::tag_byte(wire::kListValue, wire::kVarint);
  uint32_t field, wire_type;
  while (!list.done()) {
    if constexpr (!Sink::kBytes) {
      if (fields_[k].kind == Kind::kInt64 && *list.p == kUnpackedInt64Tag) {
        // A run of unpacked values, many at a time (each is at least two bytes)
        size_t room;
        uint64_t* out = sink.int64s_out(size_t(list.end - list.p) / 2, &room);
        sink.taken(decode_tagged_varints(&list.p, list.end, kUnpackedInt64Tag, out, room));
        if (list.done()) break;  // else: what follows the run, read below
      }
    }
    if (!list.tag(&field, &wire_type)) errors_.wrong(k, "a bad field tag in its value list");
    if (field != wire::kListValue) {
      if (!list.skip(wire_type)) errors_.wrong(k, "a truncated value list");
      continue;
    }
    if constexpr (Sink::kBytes) {
      Cursor value;
      if (wire_type != wire::kLengthDelimited || !list.sub(&value))
        errors_.wrong(k, "a bad bytes value");
      sink.put(value.p - data_, value.end - data_);
    } else if (fields_[k].kind == Kind::kFloat) {
      append_floats(k, wire_type, list, sink);
    } else {
      append_int64s(k, wire_type, list, sink);
    }
  }
}

template <typename Sink>
void ColumnFiller::append_floats(size_t k, uint32_t wire_type, Cursor& list, Sink& sink) {
  if (wire_type == wire::kFixed32) {  // unpacked
    uint32_t bits;
    if (!list.fixed32(&bits)) errors_.wrong(k, "a truncated float");
    sink.put(bits);
  } else if (wire_type == wire::kLengthDelimited) {  // packed
    Cursor packed;
    if (!list.sub(&packed)) errors_.wrong(k, "a bad packed float list");
    packed_floats(k, packed, sink);
  } else {
    errors_.wrong(k, "a float with the wrong wire type");
  }
}

template <typename Sink>
void ColumnFiller::append_int64s(size_t k, uint32_t wire_type, Cursor& list, Sink& sink) {
  uint64_t v;
  if (wire_type == wire::kVarint) {  // unpacked (a value the run above did not take: a bad one)
    if (!list.varint(&v)) errors_.wrong(k, "a truncated int64");
    sink.put(v);
  } else if (wire_type == wire::kLengthDelimited) {  // packed
    Cursor packed;
    if (!list.sub(&packed)) errors_.wrong(k, "a truncated packed int64 list");
    packed_int64s(k, packed, sink);
  } else {
    errors_.wrong(k, "an int64 with the wrong wire type");
  }
}

// Hands the values of one Feature of column k to `sink`, checking the list kind.
template <typename Sink>
void ColumnFiller::feature_values(size_t k, const EntryValue& feature, Sink& sink) {
  const Kind want = fields_[k].kind;
  if (!feature.merged()) {  // the usual Feature: one list of the kind asked for, one value field
    Cursor c = feature.value, list, payload;
    if (c.next_is(fields_[k].list_tag) && c.sub(&list) && c.done()) {
      Cursor values = list;
      if (!(values.next_is(kPackedTag) && values.sub(&payload) && values.done())) {
        return append_values(k, list, sink);
      }
      if constexpr (Sink::kBytes) {
        return sink.put(payload.p - data_, payload.end - data_);
      } else {
        if (want == Kind::kFloat) return packed_floats(k, payload, sink);
        return packed_int64s(k, payload, sink);
      }
    }
  }
  Kind kind = want;
  const bool has_list = feature_lists(k, feature, &kind, [&](Cursor list) {
    if (kind == want) append_values(k, list, sink);
  });
  if (has_list && kind != want) errors_.wrong_kind(k, kind);
}

// Appends the values of one Feature to an appended column; returns how many.
size_t ColumnFiller::append_feature(size_t k, const EntryValue& feature, Column& col) {
  if (fields_[k].kind == Kind::kBytes) {
    BytesAppender sink{col};
    feature_values(k, feature, sink);
    return sink.count;
  }
  NumberAppender sink{col.values};
  feature_values(k, feature, sink);
  return sink.count;
}

void ColumnFiller::fill_feature(size_t k, const EntryValue& feature) {
  const Field& f = fields_[k];
  switch (f.handler) {
    case Handler::kFixedNumbers: {
      NumberSlot sink{f.slots + index_ * f.slot_bytes, f.count};
      feature_values(k, feature, sink);
      return check_count(k, sink.count);
    }
    case Handler::kFixedBytes: {
      BytesSlot sink = bytes_slot(f);
      feature_values(k, feature, sink);
      return check_count(k, sink.count);
    }
    case Handler::kRawBytes:
      return fill_raw_bytes(k, feature);
    case Handler::kVar:
      append_feature(k, feature, *f.column);
      return end_var_record(k, true);
    case Handler::kSequence:
      return fill_sequence(k, feature);
  }
}

void ColumnFiller::fill_missing(size_t k) {
  const FieldSpec& spec = specs_[k];
  const Field& f = fields_[k];
  switch (f.handler) {
    case Handler::kFixedNumbers:
    case Handler::kRawBytes:
      return fill_default(k, f.slots + index_ * f.slot_bytes);
    case Handler::kFixedBytes: {
      if (!spec.has_default) errors_.wrong(k, "is missing and has no default");
      BytesSlot sink = bytes_slot(f);
      for (size_t i = 0; i < f.count; ++i) sink.put(-1, -1);  // -1: "the default" for the caller
      return;
    }
    case Handler::kVar:
      if (spec.required) errors_.wrong(k, "is missing (the spec requires it)");
      return end_var_record(k, false);
    case Handler::kSequence: {  // no steps
      Column& col = *f.column;
      col.row_splits.push_back(col.row_splits.back());
      return;
    }
  }
}

// A missing fixed-size feature: its default into the record's slot.
void ColumnFiller::fill_default(size_t k, uint8_t* slot) const {
  const FieldSpec& spec = specs_[k];
  if (!spec.has_default) errors_.wrong(k, "is missing and has no default");
  if (!spec.default_value.empty())
    std::memcpy(slot, spec.default_value.data(), spec.default_value.size());
}

void ColumnFiller::fill_raw_bytes(size_t k, const EntryValue& feature) {
  LastBytesValue sink;
  feature_values(k, feature, sink);
  if (sink.count != 1) errors_.wrong_raw_values(k, sink.count);
  const size_t size = size_t(sink.end - sink.start);
  if (size != specs_[k].count) errors_.wrong_raw_size(k, size);
  if (size != 0)
    std::memcpy(fields_[k].slots + index_ * fields_[k].slot_bytes, data_ + sink.start, size);
}

// A feature list: each step (a Feature) follows the spec's layout. A list in several parts (a
// map entry's value given more than once) has the steps of each, in order, as protobuf merges it.
void ColumnFiller::fill_sequence(size_t k, const EntryValue& list) {
  const FieldSpec& spec = specs_[k];
  Column& col = *fields_[k].column;
  int64_t steps = 0;
  uint32_t field, wire_type;
  list.each_part([&](Cursor part) {
    while (!part.done()) {
      if (!part.tag(&field, &wire_type)) errors_.wrong(k, "a bad field tag in its FeatureList");
      Cursor feature;
      if (field != wire::kFeatureListFeature || wire_type != wire::kLengthDelimited) {
        if (!part.skip(wire_type)) errors_.wrong(k, "a truncated FeatureList");
        continue;
      }
      if (!part.sub(&feature)) errors_.wrong(k, "a truncated Feature in its FeatureList");
      const size_t count = append_feature(k, EntryValue{feature, {nullptr, nullptr}}, col);
      if (spec.layout == Layout::kFixed && count != spec.count)
        errors_.wrong_step_count(k, steps, count);
      if (spec.layout == Layout::kVar)
        col.step_splits.push_back(int64_t(values_in(col, spec.kind)));
      ++steps;
    }
  });
  col.row_splits.push_back(col.row_splits.back() + steps);
}

void ColumnFiller::undo_record(size_t k) {
  const FieldSpec& spec = specs_[k];
  if (in_slots(spec)) return;
  Column& col = *fields_[k].column;
  const size_t rows = index_ - first_;  // complete records in this column
  size_t values = 0;
  switch (fields_[k].handler) {
    case Handler::kFixedNumbers:
    case Handler::kRawBytes:
    case Handler::kFixedBytes:
      break;
    case Handler::kVar:  // (its rows have their places already)
      values = size_t(col.row_splits[rows]);
      break;
    case Handler::kSequence: {
      col.row_splits.resize(rows + 1);
      const size_t steps = size_t(col.row_splits.back());
      if (spec.layout == Layout::kVar) {
        col.step_splits.resize(steps + 1);
        values = size_t(col.step_splits.back());
      } else {
        values = steps * spec.count;
      }
      break;
    }
  }
  if (spec.kind == Kind::kBytes) {
    col.starts.resize(values);
    col.ends.resize(values);
  } else {
    col.values.resize(values * value_size(spec.kind));
  }
}

}  // namespace tfr::decoding
