// Decodes one record at a time into the batch's columns (internal to the Example decoder), by
// the fastest path that takes the record:
//   1. its layout: the byte layout learned from earlier records of the batch (record_layout.h),
//      checked with word compares, values taken at their places;
//   2. one pass: each requested feature decoded as its key is met (entries read by EntryForms,
//      values written by ColumnFiller);
//   3. the careful pass, for anything else (a key twice, a value twice in an entry (merged, as
//      protobuf does), any error):
//      notes where every requested feature is, then fills the columns in spec order, protobuf's
//      way, so that the error reported is the one that order meets first, whatever order the
//      features came in.
// A path that does not take a record leaves nothing behind: the next one decodes it afresh, so
// every path gives the same columns, and the same error.
#pragma once

#include <cstdint>
#include <vector>

#include "column_filler.h"
#include "decode_plan.h"
#include "entry_forms.h"
#include "record_layout.h"

namespace tfr::decoding {

class RecordDecoder {
 public:
  // Records are given by their index in the batch (errors name it); `first` is the first record
  // this decoder gets. A layout is learned only from a record before `learn_before` (the part's
  // last record teaches none: no record would use it; `first`: none do). `columns`: as
  // ColumnFiller takes them.
  RecordDecoder(const uint8_t* data, const uint8_t* data_end, const std::vector<FieldSpec>& specs,
                bool sequences, size_t first, size_t learn_before,
                const std::vector<Column*>& columns)
      : specs_(specs),
        sequences_(sequences),
        errors_(specs, sequences),
        filler_(data, specs, columns, first, errors_),
        forms_(specs, data_end, errors_),
        layout_(specs, filler_, data_end),
        learns_left_(sequences ? 0 : kLearns),
        learn_before_(learn_before),
        seen_(specs.size(), 0),
        located_(specs.size()) {}

  RecordDecoder(const RecordDecoder&) = delete;
  RecordDecoder& operator=(const RecordDecoder&) = delete;

  TFR_INLINE void decode(size_t index, Cursor record) {
    errors_.index = index;
    filler_.start_record(index);
    if (layout_.learned()) {
      if (layout_.decode(record)) {
        misses_ = 0;
        return;
      }
      layout_.undo();
      ++misses_;
    }
    decode_in_general(record);
    // The layout from this record: the first one, or after records that missed the last one.
    if (learns_left_ != 0 && index < learn_before_ &&
        (!layout_.learned() || misses_ >= kMissesBeforeRelearning)) {
      --learns_left_;
      misses_ = 0;
      layout_.learn(record);
    }
  }

 private:
  // How many layouts a decoder learns at most (each costs about a record's decoding), and after
  // how many records in a row that miss the layout it learns another.
  static constexpr size_t kLearns = 8;
  static constexpr size_t kMissesBeforeRelearning = 2;

  enum class Pass { kDecode, kLocate };

  // Where the careful pass found a requested feature in the current record (the last entry of
  // its key, as protobuf keeps).
  struct Located {
    bool present = false;
    EntryValue feature;
  };

  void decode_in_general(Cursor record);
  bool walk_record(Cursor example, Pass pass);
  bool walk_map(Cursor features, bool lists, Pass pass);
  void locate(bool lists, const MapEntry& entry);
  void fill_located(size_t k);

  // Marks the features the one pass has decoded in the current record.
  size_t stamp() const { return errors_.index + 1; }

  const std::vector<FieldSpec>& specs_;
  bool sequences_;
  RecordErrors errors_;
  ColumnFiller filler_;
  EntryForms forms_;
  RecordLayout layout_;
  size_t learns_left_;
  size_t learn_before_;           // the records that may teach a layout: those before it
  size_t misses_ = 0;             // records in a row that missed the layout
  std::vector<size_t> seen_;      // the one pass: the stamp() of the last record that held each
  std::vector<Located> located_;  // the careful pass
  size_t decoded_ = 0;            // the one pass: the requested features decoded in this record
};

}  // namespace tfr::decoding
