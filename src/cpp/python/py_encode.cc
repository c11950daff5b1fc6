// tf.train.Example encoding for Python: columns in, records out (example_encoder.h).
//
// tfrec_fast/_columns.py turns Python values into columns; this file only makes them safe to read
// with the GIL released and calls the encoder. A column is a tuple
//   (kind, values, offsets, row_splits[, present])
//   kind        a Kind
//   values      INT64: int64 elements; FLOAT: float32 or float64 elements (float64 rounded to
//               float32 here, +-inf beyond its range, as protobuf); INT64 and FLOAT also a list
//               of Python ints / floats (encode_example's fast path); BYTES and FEATURE: a list of
//               bytes objects (one value each), or any bytes-like buffer
//   offsets     for a buffer: int64 [M + 1], value j = values[offsets[j]:offsets[j + 1]]
//               (Arrow's layout), or a pair (starts, ends) of int64 [M] (a BytesColumn's), or
//               None: the whole buffer is one value. None otherwise.
//   row_splits  int64 [N + 1]: row i holds values [row_splits[i], row_splits[i + 1]); None: row
//               i holds value i alone
//   present     bool or uint8 [N], or None: a row whose flag is 0 leaves the feature out
// Arrays are C-contiguous buffers (numpy, array.array, bytes, memoryview) in native byte order.
// Before the GIL is released every one is owned (PyBytesView: memory that can change is copied
// here, memory that cannot is held by reference; a list is copied, which holds its bytes
// objects), and every bytes value is checked against its buffer; the encoder checks the rows
// before it reads a value. So it reads, without the GIL, one snapshot that nothing changes.
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <list>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "example_encoder.h"
#include "py_common.h"

namespace tfr::py_bind {
namespace {

// The memory of every column of one call, alive and unchanged until the call returns. (Spans
// point into the inner vectors' heap memory, which stays put when the outer vectors grow.)
struct Owned {
  std::list<PyBytesView> views;
  std::vector<py::object> lists;  // copied lists (they hold their items), converted values
  std::vector<std::vector<BytesRef>> values;  // where each bytes value is
  std::vector<std::vector<float>> floats;     // float64 values rounded to float32
  std::vector<std::vector<int64_t>> int64s;   // ints from a list
};

// What the features of one Example (encode_example) need made here: each one's row_splits, and
// a single value given as a Python int, float or bytes object. One slot per feature, all
// reserved up front, so spans into them stay valid.
struct OneRow {
  struct Slot {
    std::array<int64_t, 2> splits;
    int64_t int64;
    float floating;
    BytesRef bytes;
  };
  explicit OneRow(size_t features) { slots.reserve(features); }
  Slot& next() {
    if (slots.size() == slots.capacity())
      throw std::logic_error("OneRow: more features than reserved");
    return slots.emplace_back();
  }
  std::vector<Slot> slots;
};

std::string type_name(py::handle v) { return Py_TYPE(v.ptr())->tp_name; }

[[noreturn]] void type_error(const std::string& name, const std::string& what) {
  throw py::type_error("feature '" + name + "': " + what);
}

[[noreturn]] void value_error(const std::string& name, const std::string& what) {
  throw py::value_error("feature '" + name + "': " + what);
}

// The struct-module code of a buffer's elements when they are in native byte order, else 0.
char native_code(const std::string& format) {
  constexpr char kNativeOrder = PY_LITTLE_ENDIAN ? '<' : '>';
  size_t i = 0;
  if (!format.empty() && (format[0] == '@' || format[0] == '=' || format[0] == kNativeOrder)) i = 1;
  return format.size() == i + 1 ? format[i] : 0;
}

template <typename T>
bool holds(const PyBytesView& v) {
  const char code = native_code(v.format());
  if (v.itemsize() != sizeof(T)) return false;
  if constexpr (std::is_same_v<T, int64_t>) return code == 'q' || code == 'l';
  if constexpr (std::is_same_v<T, float>) return code == 'f';
  return code == '?' || code == 'B' || code == 'b' || code == 'c';  // uint8_t flags
}

template <typename T>
const char* element_name() {
  if constexpr (std::is_same_v<T, int64_t>) return "int64";
  if constexpr (std::is_same_v<T, float>) return "float32 or float64";
  return "bool or uint8";
}

// The elements of view `v` (of `obj`) as T.
template <typename T>
Span<T> elements(const PyBytesView& v, py::handle obj, const std::string& name, const char* what) {
  if (!holds<T>(v)) {
    type_error(name, std::string(what) + " must be " + element_name<T>() +
                         " in native byte order, not buffer format '" + v.format() + "' of " +
                         type_name(obj));
  }
  return {reinterpret_cast<const T*>(v.data()), v.size() / sizeof(T)};
}

// The elements of `obj` as T, owned by `owned`.
template <typename T>
Span<T> take(Owned& owned, py::handle obj, const std::string& name, const char* what) {
  return elements<T>(owned.views.emplace_back(obj, alignof(T)), obj, name, what);
}

[[noreturn]] void out_of_bounds(const std::string& name, size_t j) {
  value_error(name, "bytes value " + std::to_string(j) + " lies outside its buffer");
}

// A list of bytes objects: each is one value, read in place (a bytes object never changes).
Span<BytesRef> bytes_in_list(Owned& owned, py::handle values, const std::string& name) {
  PyObject* list = PySequence_List(values.ptr());
  if (list == nullptr) throw py::error_already_set();
  owned.lists.push_back(py::reinterpret_steal<py::object>(list));
  std::vector<BytesRef>& refs = owned.values.emplace_back(size_t(PyList_GET_SIZE(list)));
  for (size_t j = 0; j < refs.size(); ++j) {
    PyObject* item = PyList_GET_ITEM(list, py::ssize_t(j));
    if (!PyBytes_Check(item)) {
      type_error(name, "BYTES values in a list are bytes objects, not " + type_name(item) +
                           " (element " + std::to_string(j) + ")");
    }
    refs[j] = {reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(item)),
               size_t(PyBytes_GET_SIZE(item))};
  }
  return {refs.data(), refs.size()};
}

// BYTES and FEATURE values: a list of bytes objects, or a buffer and where each value lies in it.
Span<BytesRef> take_bytes(Owned& owned, py::handle values, py::handle offsets,
                          const std::string& name) {
  if (PyList_Check(values.ptr())) {
    if (!offsets.is_none()) type_error(name, "values in a list of bytes objects take no offsets");
    return bytes_in_list(owned, values, name);
  }
  const PyBytesView& buffer = owned.views.emplace_back(values);
  const auto size = int64_t(buffer.size());
  std::vector<BytesRef> refs;
  auto add = [&](int64_t start, int64_t end) {
    if (start < 0 || end < start || end > size) out_of_bounds(name, refs.size());
    refs.push_back({buffer.data() + start, size_t(end - start)});
  };
  if (offsets.is_none()) {
    add(0, size);
  } else if (PyTuple_Check(offsets.ptr())) {
    auto pair = py::reinterpret_borrow<py::tuple>(offsets);
    if (pair.size() != 2) type_error(name, "offsets as a tuple are a pair (starts, ends)");
    const Span<int64_t> starts = take<int64_t>(owned, pair[0], name, "starts");
    const Span<int64_t> ends = take<int64_t>(owned, pair[1], name, "ends");
    if (starts.size != ends.size) value_error(name, "starts and ends differ in length");
    refs.reserve(starts.size);
    for (size_t j = 0; j < starts.size; ++j) add(starts[j], ends[j]);
  } else {
    const Span<int64_t> o = take<int64_t>(owned, offsets, name, "offsets");
    if (o.empty()) value_error(name, "offsets need M + 1 entries");
    refs.reserve(o.size - 1);
    for (size_t j = 0; j + 1 < o.size; ++j) add(o[j], o[j + 1]);
  }
  const std::vector<BytesRef>& kept = owned.values.emplace_back(std::move(refs));
  return {kept.data(), kept.size()};
}

std::string key_of(py::handle key) {
  if (PyUnicode_Check(key.ptr())) {
    py::ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(key.ptr(), &n);
    if (s == nullptr) throw py::error_already_set();
    return std::string(s, size_t(n));
  }
  if (PyBytes_Check(key.ptr()))
    return std::string(PyBytes_AS_STRING(key.ptr()), size_t(PyBytes_GET_SIZE(key.ptr())));
  throw py::type_error("feature names must be str, not " + type_name(key));
}

// The parts every column tuple starts with: its name (the mapping's key) and kind.
ColumnView column_named(py::handle key, py::handle spec, size_t min_size, size_t max_size,
                        const char* shape) {
  ColumnView c;
  c.name = key_of(key);
  if (!PyTuple_Check(spec.ptr())) {
    type_error(c.name, std::string("a column is a tuple ") + shape + ", not " + type_name(spec));
  }
  const auto t = py::reinterpret_borrow<py::tuple>(spec);
  if (t.size() < min_size || t.size() > max_size)
    type_error(c.name, std::string("a column is a tuple ") + shape);
  try {
    c.kind = t[0].cast<Kind>();
  } catch (const py::cast_error&) {
    type_error(c.name, "the kind is a tfrec_fast._core.Kind, not " + type_name(t[0]));
  }
  const bool numeric = c.kind == Kind::kInt64 || c.kind == Kind::kFloat;
  if (numeric && !t[2].is_none()) type_error(c.name, "offsets are for BYTES and FEATURE values");
  return c;
}

// float64 -> float32 rounded to nearest, as protobuf's Python float_list stores a float: beyond
// float32's range (from half an ulp above FLT_MAX) it is +-inf, where a plain cast is undefined.
float to_float32(double d) {
  constexpr double kFirstInf = 0x1.ffffffp+127;
  if (std::fabs(d) >= kFirstInf)
    return d > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  return static_cast<float>(d);
}

// FLOAT values: float32 read in place, float64 (numpy's default, Python floats) rounded here
// once, so the Python side needs no float32 cast (numpy's costs an errstate per call).
Span<float> take_floats(Owned& owned, py::handle values, const std::string& name) {
  const PyBytesView& v = owned.views.emplace_back(values, alignof(float));
  if (native_code(v.format()) != 'd' || v.itemsize() != sizeof(double)) {
    return elements<float>(v, values, name, "FLOAT values");
  }
  std::vector<float>& out = owned.floats.emplace_back(v.size() / sizeof(double));
  for (size_t i = 0; i < out.size(); ++i) {
    double d;  // (memcpy: the buffer is only float-aligned)
    std::memcpy(&d, v.data() + i * sizeof(double), sizeof(double));
    out[i] = to_float32(d);
  }
  return {out.data(), out.size()};
}

[[noreturn]] void overflow_error(const std::string& name, const std::string& what) {
  PyErr_SetString(PyExc_OverflowError, ("feature '" + name + "': " + what).c_str());
  throw py::error_already_set();
}

// A list of Python ints (INT64) or ints and floats (FLOAT), converted here, once: a copy of the
// list is read, so the caller changing it meanwhile changes nothing.
template <typename T>
Span<T> numbers_in_list(std::vector<std::vector<T>>& store, py::handle values,
                        const std::string& name) {
  auto list = py::reinterpret_steal<py::object>(PySequence_List(values.ptr()));
  if (!list) throw py::error_already_set();
  std::vector<T>& out = store.emplace_back(size_t(PyList_GET_SIZE(list.ptr())));
  for (size_t j = 0; j < out.size(); ++j) {
    PyObject* item = PyList_GET_ITEM(list.ptr(), py::ssize_t(j));
    if constexpr (std::is_same_v<T, int64_t>) {
      if (!PyLong_Check(item))
        type_error(name, "INT64 values in a list are ints, not " + type_name(item));
      int overflow = 0;
      out[j] = PyLong_AsLongLongAndOverflow(item, &overflow);
      if (overflow != 0) {
        overflow_error(name, "int " + py::str(item).cast<std::string>() + " out of int64 range");
      }
    } else {
      if (!PyFloat_Check(item) && !PyLong_Check(item)) {
        type_error(name, "FLOAT values in a list are floats or ints, not " + type_name(item));
      }
      const double d = PyFloat_AsDouble(item);  // (an int beyond a double's range raises)
      if (d == -1.0 && PyErr_Occurred()) throw py::error_already_set();
      out[j] = to_float32(d);
    }
  }
  return {out.data(), out.size()};
}

void take_values(ColumnView& c, Owned& owned, py::handle values, py::handle offsets) {
  const bool list = PyList_Check(values.ptr());
  switch (c.kind) {
    case Kind::kInt64:
      c.int64s = list ? numbers_in_list(owned.int64s, values, c.name)
                      : take<int64_t>(owned, values, c.name, "INT64 values");
      return;
    case Kind::kFloat:
      c.floats =
          list ? numbers_in_list(owned.floats, values, c.name) : take_floats(owned, values, c.name);
      return;
    case Kind::kBytes:
    case Kind::kFeature:
      c.bytes = take_bytes(owned, values, offsets, c.name);
      return;
  }
  value_error(c.name, "unknown kind");
}

// A column of N rows: (kind, values, offsets, row_splits[, present]).
ColumnView column_of(py::handle key, py::handle spec, Owned& owned) {
  ColumnView c = column_named(key, spec, 4, 5, "(kind, values, offsets, row_splits[, present])");
  const auto t = py::reinterpret_borrow<py::tuple>(spec);
  take_values(c, owned, t[1], t[2]);
  if (!t[3].is_none()) {
    c.row_splits = take<int64_t>(owned, t[3], c.name, "row_splits");
    if (c.row_splits.empty()) value_error(c.name, "row_splits need N + 1 entries");
  }
  if (t.size() == 5 && !t[4].is_none()) c.present = take<uint8_t>(owned, t[4], c.name, "present");
  return c;
}

// One feature of one Example: (kind, values, offsets), every value in its one row. A single value
// may be a Python int (INT64), float (FLOAT) or bytes object (BYTES, FEATURE): the common
// scalars, read without an array for them. `spec` outlives the call (the caller holds it).
// One value of column `c` given as a Python int, float or bytes object, into `slot`; false when
// `v` is none of those (for c's kind).
bool single_value(ColumnView& c, PyObject* v, bool has_offsets, OneRow::Slot& slot) {
  if (c.kind == Kind::kInt64 && PyLong_Check(v)) {
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow) {
      const std::string what = "feature '" + c.name + "': int " + py::repr(v).cast<std::string>() +
                               " out of int64 range";
      PyErr_SetString(PyExc_OverflowError, what.c_str());
      throw py::error_already_set();
    }
    slot.int64 = int64_t(x);
    c.int64s = {&slot.int64, 1};
  } else if (c.kind == Kind::kFloat && PyFloat_Check(v)) {
    slot.floating = to_float32(PyFloat_AS_DOUBLE(v));  // as protobuf: +-inf beyond range
    c.floats = {&slot.floating, 1};
  } else if ((c.kind == Kind::kBytes || c.kind == Kind::kFeature) && PyBytes_Check(v) &&
             !has_offsets) {
    slot.bytes = {reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(v)),
                  size_t(PyBytes_GET_SIZE(v))};
    c.bytes = {&slot.bytes, 1};
  } else {
    return false;
  }
  return true;
}

// One feature of one Example: its row is all its values.
void one_row(ColumnView& c, OneRow::Slot& slot) {
  slot.splits = {0, int64_t(c.num_values())};
  c.row_splits = {slot.splits.data(), 2};
}

ColumnView feature_of(py::handle key, py::handle spec, Owned& owned, OneRow& row) {
  ColumnView c = column_named(key, spec, 3, 3, "(kind, values, offsets)");
  const auto t = py::reinterpret_borrow<py::tuple>(spec);
  OneRow::Slot& slot = row.next();
  if (!single_value(c, PyTuple_GET_ITEM(t.ptr(), 1), !t[2].is_none(), slot))
    take_values(c, owned, t[1], t[2]);
  one_row(c, slot);
  return c;
}

// The kind of a plain int, float or bytes object (exactly those types: bool and subclasses go to
// `convert`), or of a non-empty list of one of them: taken without a round trip through Python.
std::optional<Kind> plain_kind(PyObject* v) {
  PyTypeObject* type = Py_TYPE(v);
  if (PyList_CheckExact(v)) {
    const py::ssize_t n = PyList_GET_SIZE(v);
    if (n == 0) return std::nullopt;
    type = Py_TYPE(PyList_GET_ITEM(v, 0));
    for (py::ssize_t i = 1; i < n; ++i) {
      if (Py_TYPE(PyList_GET_ITEM(v, i)) != type) return std::nullopt;
    }
  }
  if (type == &PyLong_Type) return Kind::kInt64;
  if (type == &PyFloat_Type) return Kind::kFloat;
  if (type == &PyBytes_Type) return Kind::kBytes;
  return std::nullopt;
}

// The (name, column) pairs of a mapping, as a list that holds them (no Python code runs while
// they are read).
py::list items_of(py::handle mapping, const char* what) {
  if (PyDict_Check(mapping.ptr())) {
    PyObject* items = PyDict_Items(mapping.ptr());
    if (items == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::list>(items);
  }
  if (!PyObject_HasAttrString(mapping.ptr(), "items")) {
    throw py::type_error(std::string(what) + " must be a mapping of feature name to column, not " +
                         type_name(mapping));
  }
  return py::list(mapping.attr("items")());
}

std::vector<ColumnView> columns_of(py::handle mapping, Owned& owned) {
  const py::list items = items_of(mapping, "columns");
  std::vector<ColumnView> columns;
  columns.reserve(items.size());
  for (py::handle item : items) {
    auto pair = py::reinterpret_borrow<py::tuple>(item);
    columns.push_back(column_of(pair[0], pair[1], owned));
  }
  return columns;
}

// features: name -> a plain int/float/bytes value (or a list of one of them: copied, then each
// element checked as it is converted), or what `convert(name, value)` makes of any
// other value: its (kind, values, offsets) (tfrec_fast.encode decides kinds); with convert None,
// every other value must already be that tuple.
py::bytes encode_example(py::handle features, py::handle convert) {
  const py::list items = items_of(features, "features");
  Owned owned;
  OneRow row(items.size());
  std::vector<ColumnView> columns;
  columns.reserve(items.size());
  for (py::handle item : items) {
    auto pair = py::reinterpret_borrow<py::tuple>(item);
    PyObject* value = PyTuple_GET_ITEM(pair.ptr(), 1);
    if (const std::optional<Kind> kind = plain_kind(value)) {
      ColumnView& c = columns.emplace_back();
      c.name = key_of(pair[0]);
      c.kind = *kind;
      OneRow::Slot& slot = row.next();
      if (!single_value(c, value, false, slot))
        take_values(c, owned, pair[1], py::none());  // a list
      one_row(c, slot);
    } else if (convert.is_none()) {
      columns.push_back(feature_of(pair[0], pair[1], owned, row));
    } else {
      py::object spec = convert(pair[0], pair[1]);
      owned.lists.push_back(spec);  // held until the encoding ends
      columns.push_back(feature_of(pair[0], spec, owned, row));
    }
  }
  std::vector<uint64_t> scratch;
  const size_t size = example_size(columns, scratch);
  PyObject* out = PyBytes_FromStringAndSize(nullptr, py::ssize_t(size));
  if (out == nullptr) throw py::error_already_set();
  auto result = py::reinterpret_steal<py::bytes>(out);
  auto* dst = reinterpret_cast<uint8_t*>(PyBytes_AS_STRING(out));
  if (size >= (1 << 16)) {
    py::gil_scoped_release release;
    write_example(columns, scratch, dst);
  } else {
    write_example(columns, scratch, dst);
  }
  return result;
}

py::object encode_examples(py::handle columns, size_t num_rows) {
  Owned owned;
  const std::vector<ColumnView> views = columns_of(columns, owned);
  auto batch = std::make_shared<RecordBatch>();
  {
    py::gil_scoped_release release;
    tfr::encode_examples(views, num_rows, *batch);
  }
  return wrap_batch(std::move(batch));
}

py::object encode_sequence_examples(py::handle context, py::handle feature_lists, size_t num_rows) {
  Owned owned;
  const std::vector<ColumnView> views = columns_of(context, owned);
  std::vector<FeatureListView> lists;
  for (py::handle item : items_of(feature_lists, "feature_lists")) {
    auto pair = py::reinterpret_borrow<py::tuple>(item);
    FeatureListView l;
    l.steps.name = key_of(pair[0]);
    if (!PyTuple_Check(pair[1].ptr()) || py::len(pair[1]) != 2) {
      type_error(l.steps.name, "a feature list is a pair (steps column, step splits)");
    }
    auto entry = py::reinterpret_borrow<py::tuple>(pair[1]);
    l.steps = column_of(pair[0], entry[0], owned);
    l.num_steps = l.steps.num_rows();
    l.splits = take<int64_t>(owned, entry[1], l.steps.name, "step splits");
    lists.push_back(std::move(l));
  }
  auto batch = std::make_shared<RecordBatch>();
  {
    py::gil_scoped_release release;
    tfr::encode_sequence_examples(views, lists, num_rows, *batch);
  }
  return wrap_batch(std::move(batch));
}

py::object encode_features(py::handle name, py::handle column) {
  Owned owned;
  const ColumnView view = column_of(name, column, owned);
  auto batch = std::make_shared<RecordBatch>();
  {
    py::gil_scoped_release release;
    tfr::encode_features(view, view.num_rows(), *batch);
  }
  return wrap_batch(std::move(batch));
}

}  // namespace

void register_encode(py::module_& m) {
  m.def("encode_example", &encode_example, py::arg("features"), py::arg("convert") = py::none(),
        "One serialized tf.train.Example from {name: value}: a plain int, float or bytes value as\n"
        "it is, any other through convert(name, value) -> (kind, values, offsets) (with convert\n"
        "None, the value must be that tuple; see encode_examples).");
  m.def("encode_examples", &encode_examples, py::arg("columns"), py::arg("num_rows"),
        "N serialized tf.train.Examples in a RecordBatch from columns of N rows:\n"
        "{name: (kind, values, offsets, row_splits[, present])}. Record i holds row i of each\n"
        "column, in the mapping's order.");
  m.def("encode_sequence_examples", &encode_sequence_examples, py::arg("context"),
        py::arg("feature_lists"), py::arg("num_rows"),
        "N serialized tf.train.SequenceExamples: context columns of N rows, and per feature list\n"
        "(steps column, step splits [N + 1]): record i's steps are rows splits[i]..splits[i+1].");
  m.def("encode_features", &encode_features, py::arg("name"), py::arg("column"),
        "Each row of a column as one serialized tf.train.Feature message, in a RecordBatch.");
}

}  // namespace tfr::py_bind
