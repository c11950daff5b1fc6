// RecordDecoder's general paths: the one pass and the careful pass over a record.
#include "record_decoder.h"

namespace tfr::decoding {

void RecordDecoder::decode_in_general(Cursor record) {
  decoded_ = 0;
  try {
    if (walk_record(record, Pass::kDecode)) {
      if (decoded_ == specs_.size()) return;  // each feature once: none missing
      for (size_t k = 0; k < specs_.size(); ++k) {
        if (seen_[k] != stamp()) filler_.fill_missing(k);
      }
      return;
    }
  } catch (const ParseError&) {  // reported below, in the careful pass's order
  }
  for (size_t k = 0; k < specs_.size(); ++k) filler_.undo_record(k);
  for (Located& l : located_) l.present = false;
  walk_record(record, Pass::kLocate);
  for (size_t k = 0; k < specs_.size(); ++k) fill_located(k);
}

// Walks a record's fields. The one pass (kDecode) decodes each requested feature as it comes
// and returns false at anything unusual; the careful pass (kLocate) notes where each one is.
bool RecordDecoder::walk_record(Cursor example, Pass pass) {
  uint32_t field, wire_type;
  while (!example.done()) {
    Cursor map;
    if (example.next_is(kFeaturesTag)) {  // the usual field first
      if (!example.sub(&map)) errors_.malformed("a truncated Features message");
      if (!walk_map(map, false, pass)) return false;
      continue;
    }
    if (!example.tag(&field, &wire_type)) errors_.malformed("a bad field tag");
    // Example.features and SequenceExample.context are both field 1 holding a Features map;
    // SequenceExample.feature_lists (field 2) maps names to FeatureLists.
    const bool lists = sequences_ && field == wire::kSequenceFeatureLists;
    if ((field == wire::kExampleFeatures || lists) && wire_type == wire::kLengthDelimited) {
      if (!example.sub(&map)) errors_.malformed("a truncated Features message");
      if (!walk_map(map, lists, pass)) return false;
    } else if (!example.skip(wire_type)) {
      errors_.malformed("a truncated or unsupported field");
    }
  }
  return true;
}

// Walks a map<string, Feature> (or, for `lists`, map<string, FeatureList>).
bool RecordDecoder::walk_map(Cursor features, bool lists, Pass pass) {
  size_t position = 0;
  MapEntry entry;
  while (!features.done()) {
    if (!forms_.next(&features, lists, &position, &entry) || entry.spec == MapEntry::kNoSpec)
      continue;
    if (pass == Pass::kLocate) {
      locate(lists, entry);
      continue;
    }
    const size_t k = size_t(entry.spec);
    if (entry.spec == MapEntry::kSeveralSpecs || entry.merged.p != nullptr || seen_[k] == stamp())
      return false;
    seen_[k] = stamp();
    ++decoded_;
    const bool filled = entry.payload.p != nullptr ? filler_.fill_payload(k, entry.payload)
                                                   : filler_.fill_usual_feature(k, entry.value);
    if (!filled) filler_.fill_feature(k, entry.value);
  }
  return true;
}

// The careful pass: where every requested feature of the entry's name is.
void RecordDecoder::locate(bool lists, const MapEntry& entry) {
  for (size_t k = 0; k < specs_.size(); ++k) {
    if (!names(specs_[k], lists, entry.key)) continue;
    Located& l =
        located_[k];  // member by member: copying a whole Located stalls on store forwarding
    l.present = true;
    l.feature = entry.feature();
  }
}

void RecordDecoder::fill_located(size_t k) {
  const Located& l = located_[k];
  if (!l.present) return filler_.fill_missing(k);
  if (l.feature.merged() || !filler_.fill_usual_feature(k, l.feature.value))
    filler_.fill_feature(k, l.feature);
}

}  // namespace tfr::decoding
