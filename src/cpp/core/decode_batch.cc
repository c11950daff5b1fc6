// The batch driver of the Example decoder (decode_examples): the batch's columns, the batch cut
// into parts decoded in parallel on the task pool, each part by a RecordDecoder of its own, and
// the parts' columns joined in record order.
#include <algorithm>
#include <atomic>
#include <exception>
#include <new>

#include "decode_plan.h"
#include "example_decoder.h"
#include "record_decoder.h"
#include "task_pool.h"

namespace tfr {
namespace {

using decoding::in_slots;

// An empty column for appending the records of a part: its first split(s).
void start_column(Column& c, const FieldSpec& s) {
  if (s.layout == Layout::kVar || s.sequence) c.row_splits.assign(1, 0);
  if (s.sequence && s.layout == Layout::kVar) c.step_splits.assign(1, 0);
}

// Room for n records in an appended column (what is known of their size): a VarLen column's
// row_splits and present get their places, each record's written as it ends.
void reserve_records(Column& c, const FieldSpec& s, size_t n) {
  if (s.layout == Layout::kVar && !s.sequence) {
    c.row_splits.resize(n + 1);
    c.present.resize(n);
  } else if (s.sequence) {
    c.row_splits.reserve(n + 1);
  }
}

template <typename T>
void append_shifted(std::vector<T>& to, const std::vector<T>& from, T shift) {
  // from[0] is the part's first split (0): the batch's last split already stands for it. One
  // resize and a plain loop (vectorised), not a push_back per split: this runs after the parts,
  // on one thread, while the others wait.
  const size_t at = to.size();
  to.resize(at + from.size() - 1);
  T* out = to.data() + at;
  for (size_t i = 1; i < from.size(); ++i) out[i - 1] = from[i] + shift;
}

// Appends a later part's column to the batch's: values and offsets as they are (bytes offsets
// point into the same records), splits shifted past the batch's values (or steps) so far.
void join(Column& to, Column& from) {
  to.values.append(from.values.data(), from.values.size());
  to.starts.insert(to.starts.end(), from.starts.begin(), from.starts.end());
  to.ends.insert(to.ends.end(), from.ends.begin(), from.ends.end());
  to.present.insert(to.present.end(), from.present.begin(), from.present.end());
  if (!from.row_splits.empty())
    append_shifted(to.row_splits, from.row_splits, to.row_splits.back());
  if (!from.step_splits.empty())
    append_shifted(to.step_splits, from.step_splits, to.step_splits.back());
}

// The batch's columns: fixed-size ones sized for every record's slot (each part writes its
// records' slots: in the values, or in the starts and ends for bytes values), the others empty
// with room for n records.
std::vector<Column> batch_columns(const std::vector<FieldSpec>& specs, size_t n, BufferPool* pool) {
  std::vector<Column> columns(specs.size());
  for (size_t k = 0; k < specs.size(); ++k) {
    const FieldSpec& s = specs[k];
    if (!in_slots(s)) {  // (part 0 appends to it: room for its records, see below)
      start_column(columns[k], s);
      continue;
    }
    const size_t per_record = decoding::bytes_per_record(s);
    if (n != 0 && per_record > SIZE_MAX / n) throw std::bad_alloc();
    if (pooled_values(s)) {
      if (pool != nullptr && per_record * n >= kPooledColumnBytes) {
        columns[k].values = pool->take(per_record * n);
      }
      columns[k].values.reserve(per_record * n);
      columns[k].values.resize(per_record * n);
    } else {
      // (a length std::vector refuses is a MemoryError too, not its length_error)
      if (s.count * n > columns[k].starts.max_size()) throw std::bad_alloc();
      columns[k].starts.resize(s.count * n);
      columns[k].ends.resize(s.count * n);
    }
  }
  return columns;
}

// Parts per thread when a worker may start late (asleep): more parts than threads let it take
// fewer of them. When the workers are awake, one part each: every part costs a decoder that
// learns the records' forms anew, and its columns' cache lines written by the other core
// (callgrind: +4 K instructions a part; a C++ loop alternating both, call by call, on 1024-record
// batches: 2 threads took 1.06-1.2x longer with 4 parts a thread than with one).
constexpr size_t kPartsPerThread = 4;
constexpr size_t kMinRecordsPerPart = 64;

// How much work each thread should have at least, in records (a record, or this many bytes of
// records, is one unit): a thread woken for less costs about what it saves. At ~70 ns a record
// (MNIST-like), 512 records are ~35 us, about what waking a thread costs on a virtual machine.
constexpr size_t kWorkPerThread = 512;
constexpr size_t kBytesPerRecordOfWork = 1024;
// The work a call needs before it waits for sleeping workers (~290 us at ~70 ns a unit, some
// three times what a wake takes here). With less, the caller would do most of the parts alone
// and then wait for a late worker's: in a loop of calls over 1 ms apart (the workers asleep at
// each), 2 threads took 1.36x the time of one on 1024-record tutorial batches.
constexpr size_t kWorkForSleepers = 8 * kWorkPerThread;

size_t work_units(size_t n, size_t bytes) { return n + bytes / kBytesPerRecordOfWork; }

// How a call of n records (`bytes` long) asked to use `threads` threads is cut into parts, and
// on how many threads they run now (fewer than asked: the others are asleep, and the call has
// too little work to wait for them).
struct Cut {
  size_t parts;
  size_t threads;
};

Cut cut_for(size_t n, size_t bytes, size_t threads) {
  if (threads <= 1 || n <= 1) return {n == 0 ? size_t(0) : size_t(1), 1};
  size_t per_thread = 1, run_on = threads;
  const size_t awake = awake_task_workers();
  if (awake + 1 < threads) {
    if (work_units(n, bytes) >= kWorkForSleepers) {
      per_thread = kPartsPerThread;  // the caller takes most of them while the workers wake
    } else {
      // The same parts, on the threads awake (the caller alone if none): the results and the
      // code that joins the parts do not depend on the pool's state.
      run_on = awake + 1;
    }
  }
  const size_t parts = std::max(threads, std::min(threads * per_thread, n / kMinRecordsPerPart));
  return {std::min(parts, n), run_on};
}

// The first record of part `part` of `parts` over n records: the first n % parts parts hold one
// record more.
size_t part_begin(size_t part, size_t parts, size_t n) {
  return part * (n / parts) + std::min(part, n % parts);
}

// The decoder reads a record's first bytes and skips its large values, so in a batch larger than
// the cache every record starts with a wait on memory, at a stride the hardware prefetchers do
// not follow (MNIST-like and VOC-like batches parsed 1.4-1.7x faster with this). The first two
// lines of the record this many places ahead are asked for early, and its last line, where the
// features after a large value (a VOC-like record's boxes after its image) are.
constexpr size_t kPrefetchAhead = 4;

inline void prefetch_record(const uint8_t* data, int64_t start, int64_t end) {
  prefetch(data + start);
  if (end - start > 64) prefetch(data + start + 64);
  if (end - start > 128) prefetch(data + end - 1);
}

}  // namespace

std::vector<Column> decode_examples(const uint8_t* data, const int64_t* offsets, size_t n,
                                    const std::vector<FieldSpec>& specs, bool sequence_examples,
                                    size_t num_threads, BufferPool* pool, bool learn_layouts) {
  for (const FieldSpec& s : specs) decoding::check_spec(s);
  const size_t nspecs = specs.size();
  std::vector<Column> columns = batch_columns(specs, n, pool);
  const Cut cut = cut_for(n, size_t(offsets[n] - offsets[0]), num_threads);
  const size_t parts = cut.parts;
  // Threads the parts could use but that sleep: woken (without work) for the next call.
  if (cut.threads < std::min(num_threads, parts)) wake_task_workers(num_threads - 1);
  // Part 0 appends to the batch's columns, each later part to its own, joined in order below.
  std::vector<std::vector<Column>> later(parts > 1 ? parts - 1 : 0);
  std::vector<std::exception_ptr> errors(parts);
  std::atomic<size_t> first_failed{parts};
  run_tasks(parts, cut.threads, [&](size_t part) {
    const size_t begin = part_begin(part, parts, n), end = part_begin(part + 1, parts, n);
    try {
      std::vector<Column*> targets(nspecs, nullptr);
      if (part > 0) later[part - 1].resize(nspecs);
      for (size_t k = 0; k < nspecs; ++k) {
        if (in_slots(specs[k])) {  // the batch's: only this part's slots are written
          targets[k] = &columns[k];
          continue;
        }
        if (part > 0) start_column(later[part - 1][k], specs[k]);
        targets[k] = part == 0 ? &columns[k] : &later[part - 1][k];
        reserve_records(*targets[k], specs[k], end - begin);
      }
      decoding::RecordDecoder decoder(data, data + offsets[n], specs, sequence_examples, begin,
                                      learn_layouts && end > begin ? end - 1 : begin, targets);
      for (size_t i = begin; i < end; ++i) {
        // After an earlier part failed, this one's columns are never used.
        if (first_failed.load(std::memory_order_relaxed) < part) return;
        if (i + kPrefetchAhead < end) {
          prefetch_record(data, offsets[i + kPrefetchAhead], offsets[i + kPrefetchAhead + 1]);
        }
        decoder.decode(i, decoding::Cursor{data + offsets[i], data + offsets[i + 1]});
      }
    } catch (...) {  // the first record that fails in the batch is the one reported
      errors[part] = std::current_exception();
      size_t seen = first_failed.load();
      while (part < seen && !first_failed.compare_exchange_weak(seen, part)) {
      }
    }
  });
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  for (size_t k = 0; k < nspecs; ++k) {
    if (!in_slots(specs[k])) {
      for (std::vector<Column>& part : later) join(columns[k], part[k]);
    }
  }
  return columns;
}

size_t records_for_pooled_column(const std::vector<FieldSpec>& specs) {
  size_t fewest = SIZE_MAX;
  for (const FieldSpec& s : specs) {
    if (!pooled_values(s)) continue;
    const size_t per_record = decoding::bytes_per_record(s);
    if (per_record == 0) continue;
    fewest = std::min(fewest, (kPooledColumnBytes + per_record - 1) / per_record);
  }
  return fewest;
}

size_t decode_threads_worth(size_t n, size_t bytes) {
  return std::max<size_t>(1, std::min(work_units(n, bytes) / kWorkPerThread, kMaxTaskThreads));
}

}  // namespace tfr
