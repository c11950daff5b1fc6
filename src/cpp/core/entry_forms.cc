// EntryForms' learning: matching a key no hint holds, and learning an entry's form.
#include "entry_forms.h"

namespace tfr::decoding {

bool EntryForms::read_entry(Cursor entry, Cursor* key, Cursor* value) const {
  uint32_t field, wire_type;
  int values = 0;
  while (!entry.done()) {
    if (!entry.tag(&field, &wire_type)) errors_.malformed("a bad tag in a feature map entry");
    Cursor* target = field == wire::kMapKey ? key : field == wire::kMapValue ? value : nullptr;
    if (target != nullptr && wire_type == wire::kLengthDelimited) {
      if (!entry.sub(target)) errors_.malformed("a truncated feature name or value");
      values += target == value;
    } else if (!entry.skip(wire_type)) {
      errors_.malformed("a truncated field in a feature map entry");
    }
  }
  return values > 1;
}

// match's other answers: a key its position did not hold in the previous record, or the same
// key, in another form than its hint's (known_entry missed it), while the hint may learn again.
int EntryForms::new_match(bool lists, size_t position, Cursor key, Cursor at, Cursor value) {
  std::vector<Hint>& hints = hints_[lists];
  const size_t size = size_t(key.end - key.p);
  if (position < known_[lists]) {
    Hint& h = hints[position];
    if (h.size == size && same_bytes(h.key, key.p, size)) {
      h.key = key.p;
      return relearn(h, at, value);
    }
  }
  if (position >= hints.size()) {
    hints.resize(position + 1);
    known_[lists] = hints.size();
  }
  Hint& h = hints[position];
  h = Hint{key.p, size, MapEntry::kNoSpec, Form::kNone, 0, kRelearns, {0, 0}, {0, 0}};
  for (size_t k = 0; k < specs_.size(); ++k) {
    if (names(specs_[k], lists, key))
      h.spec = h.spec == MapEntry::kNoSpec ? int(k) : MapEntry::kSeveralSpecs;
  }
  if (h.spec != MapEntry::kSeveralSpecs && key.p != nullptr && value.p != nullptr)
    learn_form(h, at, value);
  return h.spec;
}

// The form of this entry, if it has one (an entry without one leaves the hint as it was). An
// empty Feature where a form was learned (a VOC-like record without objects) says nothing new:
// the hint keeps its form.
int EntryForms::relearn(Hint& h, Cursor at, Cursor value) const {
  --h.relearns;
  if (h.spec == MapEntry::kSeveralSpecs || h.key == nullptr || value.p == nullptr) return h.spec;
  if (h.form != Form::kNone && empty_feature(h, value)) return h.spec;
  Hint trial = h;
  learn_form(trial, at, value);
  if (trial.form != Form::kNone) h = trial;
  return h.spec;
}

// The hint's form: the most specific one whose check takes the entry at `at` as it was read
// (same value), signed from its bytes; kNone if none does. An empty Feature says nothing of the
// next records' payloads: it gets the short entry form with its value signed too, which the next
// entry holding values misses (and teaches its own form).
void EntryForms::learn_form(Hint& h, Cursor at, Cursor value) const {
  const bool empty = empty_feature(h, value);
  const size_t empty_size = empty ? size_t(value.end - value.p) : 0;
  const Form forms[] = {Form::kShortFeature, Form::kShortEntry, Form::kLongFeature};
  for (Form form : forms) {
    const bool feature = form != Form::kShortEntry;
    const size_t signed_size =
        h.size + 3 + (form == Form::kShortFeature ? 5 : 0) + (empty ? 1 + empty_size : 0);
    if ((feature && (h.spec < 0 || empty)) || signed_size > 16) continue;
    h.form = form;
    h.list_tag = feature ? list_tag(specs_[size_t(h.spec)].kind) : 0;
    uint8_t bytes[16] = {}, mask[16] = {};
    bytes[0] = kKeyTag;
    bytes[1] = uint8_t(h.size);
    std::memcpy(bytes + 2, h.key, h.size);
    bytes[2 + h.size] = kValueTag;
    std::memset(mask, 0xff, h.size + 3);
    if (form == Form::kShortFeature) {  // after the value's length
      bytes[4 + h.size] = h.list_tag;
      bytes[6 + h.size] = kPackedTag;
      mask[4 + h.size] = mask[6 + h.size] = 0xff;
    }
    if (empty) {  // the value's length and bytes
      bytes[3 + h.size] = uint8_t(empty_size);
      if (empty_size != 0) std::memcpy(bytes + 4 + h.size, value.p, empty_size);
      std::memset(mask + 3 + h.size, 0xff, 1 + empty_size);
    }
    std::memcpy(h.signature, bytes, 16);
    std::memcpy(h.mask, mask, 16);
    Cursor rest = at, entry_key, entry_value, payload;
    if (known_entry(h, &rest, &entry_key, &entry_value, &payload) && entry_value.p == value.p &&
        entry_value.end == value.end) {
      return;
    }
  }
  h.form = Form::kNone;
}

}  // namespace tfr::decoding
