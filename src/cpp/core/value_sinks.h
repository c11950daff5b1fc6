// Where the Example decoder puts the values of one feature of one record (internal to the
// decoder): ColumnFiller hands each value to a sink as it reads it. Numbers sinks take put()
// (one value), put_floats() (packed floats in host order) and room for decoded varints
// (int64s_out, then taken); bytes sinks take put(start, end), offsets into the batch's records.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "byte_buffer.h"
#include "example_columns.h"

namespace tfr::decoding {

// Numbers for a record's slot in a fixed-size column: keeps the first `room` values and counts
// them all (a count other than `room` is an error the caller reports).
struct NumberSlot {
  static constexpr bool kBytes = false;
  uint8_t* out;
  size_t room;
  size_t count = 0;

  template <typename T>
  void put(T value) {
    if (count < room) std::memcpy(out + count * sizeof(T), &value, sizeof(T));
    ++count;
  }
  void put_floats(const uint8_t* values, size_t n) {  // n floats back to back, host order
    const size_t keep = count < room ? std::min(n, room - count) : 0;
    if (keep != 0) std::memcpy(out + count * 4, values, keep * 4);
    count += n;
  }
  // Where decoded int64s go, and how many fit (`bytes` of varints: at most as many values); then
  // taken(k) for the k written there.
  uint64_t* int64s_out(size_t, size_t* fit) {
    const size_t at = std::min(count, room);
    *fit = room - at;
    return reinterpret_cast<uint64_t*>(out) + at;
  }
  void taken(size_t k) { count += k; }
};

// Numbers appended to a column's values.
struct NumberAppender {
  static constexpr bool kBytes = false;
  ByteBuffer& values;
  size_t count = 0;

  template <typename T>
  void put(T value) {
    values.append(reinterpret_cast<const uint8_t*>(&value), sizeof(T));
    ++count;
  }
  void put_floats(const uint8_t* floats, size_t n) {
    values.append(floats, n * 4);
    count += n;
  }
  uint64_t* int64s_out(size_t bytes, size_t* fit) {
    *fit = bytes;
    return reinterpret_cast<uint64_t*>(values.grow_for(bytes * 8));
  }
  void taken(size_t k) {
    values.resize(values.size() + k * 8);
    count += k;
  }
};

// Bytes values appended to a column as [start, end) offsets into the records.
struct BytesAppender {
  static constexpr bool kBytes = true;
  Column& column;
  size_t count = 0;

  void put(int64_t start, int64_t end) {
    column.starts.push_back(start);
    column.ends.push_back(end);
    ++count;
  }
};

// Bytes values for a record's slots of starts and ends in a fixed-size column: keeps the first
// `room` and counts them all.
struct BytesSlot {
  static constexpr bool kBytes = true;
  int64_t* starts;
  int64_t* ends;
  size_t room;
  size_t count = 0;

  void put(int64_t start, int64_t end) {
    if (count < room) {
      starts[count] = start;
      ends[count] = end;
    }
    ++count;
  }
};

// The last bytes value of a feature, and how many it holds (raw bytes read exactly one).
struct LastBytesValue {
  static constexpr bool kBytes = true;
  int64_t start = 0;
  int64_t end = 0;
  size_t count = 0;

  void put(int64_t value_start, int64_t value_end) {
    start = value_start;
    end = value_end;
    ++count;
  }
};

}  // namespace tfr::decoding
