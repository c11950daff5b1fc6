// tf.train.Example encoding for Python: columns in, records out (example_encoder.h).
//
// tfrec_fast/_columns.py turns Python values into columns; this file only makes them safe to read
// with the GIL released and calls the encoder. A column is a tuple
//   (kind, values, offsets, row_splits[, present])
//   kind        a Kind
//   values      INT64: int64 elements; FLOAT: float32 elements; BYTES and FEATURE: any bytes-like
//   offsets     BYTES and FEATURE: int64 [M + 1], value j = values[offsets[j]:offsets[j + 1]]
//               (Arrow's layout), or a pair (starts, ends) of int64 [M] (a BytesColumn's), or
//               None: the whole buffer is one value. None for INT64 and FLOAT.
//   row_splits  int64 [N + 1]: row i holds values [row_splits[i], row_splits[i + 1]); None: row
//               i holds value i alone
//   present     bool or uint8 [N], or None: a row whose flag is 0 leaves the feature out
// Arrays are C-contiguous buffers (numpy, array.array, bytes, memoryview) in native byte order.
// Before the GIL is released every one is owned (PyBytesView: memory that can change is copied
// here, memory that cannot is held by reference), so the encoder, which validates the columns
// before it reads a value, reads one snapshot that nothing changes.
#include <deque>
#include <string>
#include <type_traits>
#include <vector>

#include "example_encoder.h"
#include "py_common.h"

namespace tfr::py_bind {
namespace {

// The memory of every column of one call, alive and unchanged until the call returns.
struct Owned {
  std::deque<PyBytesView> views;
  std::deque<std::vector<int64_t>> made;  // bounds made here (one value, one row)
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
  constexpr char kNativeOrder = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? '<' : '>';
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
  if constexpr (std::is_same_v<T, float>) return "float32";
  return "bool or uint8";
}

// The elements of `obj` as T, owned by `owned`.
template <typename T>
Span<T> take(Owned& owned, py::handle obj, const std::string& name, const char* what) {
  const PyBytesView& v = owned.views.emplace_back(obj, alignof(T));
  if (!holds<T>(v)) {
    type_error(name, std::string(what) + " must be " + element_name<T>() +
                         " in native byte order, not buffer format '" + v.format() + "' of " +
                         type_name(obj));
  }
  return {reinterpret_cast<const T*>(v.data()), v.size() / sizeof(T)};
}

Span<int64_t> made(Owned& owned, std::vector<int64_t> values) {
  const std::vector<int64_t>& v = owned.made.emplace_back(std::move(values));
  return {v.data(), v.size()};
}

// BYTES and FEATURE values: the buffer, then where each value lies in it.
void take_bytes(ColumnView& c, Owned& owned, py::handle values, py::handle offsets) {
  const PyBytesView& v = owned.views.emplace_back(values);
  c.bytes = {v.data(), v.size()};
  if (offsets.is_none()) {
    c.starts = made(owned, {0});
    c.ends = made(owned, {int64_t(v.size())});
  } else if (PyTuple_Check(offsets.ptr())) {
    auto pair = py::reinterpret_borrow<py::tuple>(offsets);
    if (pair.size() != 2) type_error(c.name, "offsets as a tuple are a pair (starts, ends)");
    c.starts = take<int64_t>(owned, pair[0], c.name, "starts");
    c.ends = take<int64_t>(owned, pair[1], c.name, "ends");
  } else {
    const Span<int64_t> o = take<int64_t>(owned, offsets, c.name, "offsets");
    if (o.empty()) value_error(c.name, "offsets need M + 1 entries");
    c.starts = {o.data, o.size - 1};
    c.ends = {o.data + 1, o.size - 1};
  }
}

std::string key_of(py::handle key) {
  if (PyUnicode_Check(key.ptr())) {
    py::ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(key.ptr(), &n);
    if (s == nullptr) throw py::error_already_set();
    return std::string(s, size_t(n));
  }
  if (PyBytes_Check(key.ptr())) return std::string(PyBytes_AS_STRING(key.ptr()), size_t(PyBytes_GET_SIZE(key.ptr())));
  throw py::type_error("feature names must be str, not " + type_name(key));
}

// One column. `whole_row`: the tuple is (kind, values, offsets) and all its values form one row.
ColumnView column_of(py::handle key, py::handle spec, Owned& owned, bool whole_row) {
  ColumnView c;
  c.name = key_of(key);
  const char* shape = whole_row ? "(kind, values, offsets)" : "(kind, values, offsets, row_splits[, present])";
  if (!PyTuple_Check(spec.ptr())) type_error(c.name, std::string("a column is a tuple ") + shape + ", not " + type_name(spec));
  auto t = py::reinterpret_borrow<py::tuple>(spec);
  if (whole_row ? t.size() != 3 : t.size() != 4 && t.size() != 5) {
    type_error(c.name, std::string("a column is a tuple ") + shape);
  }
  if (!py::isinstance<Kind>(t[0])) type_error(c.name, "the kind is a tfrec_fast._core.Kind, not " + type_name(t[0]));
  c.kind = t[0].cast<Kind>();
  const bool numeric = c.kind == Kind::kInt64 || c.kind == Kind::kFloat;
  if (numeric && !t[2].is_none()) type_error(c.name, "offsets are for BYTES and FEATURE values");
  switch (c.kind) {
    case Kind::kInt64: c.int64s = take<int64_t>(owned, t[1], c.name, "INT64 values"); break;
    case Kind::kFloat: c.floats = take<float>(owned, t[1], c.name, "FLOAT values"); break;
    case Kind::kBytes:
    case Kind::kFeature: take_bytes(c, owned, t[1], t[2]); break;
    default: value_error(c.name, "unknown kind");
  }
  if (whole_row) {
    c.row_splits = made(owned, {0, int64_t(c.num_values())});
    return c;
  }
  if (!t[3].is_none()) {
    c.row_splits = take<int64_t>(owned, t[3], c.name, "row_splits");
    if (c.row_splits.empty()) value_error(c.name, "row_splits need N + 1 entries");
  }
  if (t.size() == 5 && !t[4].is_none()) c.present = take<uint8_t>(owned, t[4], c.name, "present");
  return c;
}

// The (name, column) pairs of a mapping, as a list that holds them (no Python code runs while
// they are read).
py::list items_of(py::handle mapping, const char* what) {
  if (!PyDict_Check(mapping.ptr()) && !PyObject_HasAttrString(mapping.ptr(), "items")) {
    throw py::type_error(std::string(what) + " must be a mapping of feature name to column, not " +
                         type_name(mapping));
  }
  return py::list(mapping.attr("items")());
}

std::vector<ColumnView> columns_of(py::handle mapping, Owned& owned, bool whole_row) {
  std::vector<ColumnView> columns;
  for (py::handle item : items_of(mapping, "columns")) {
    auto pair = py::reinterpret_borrow<py::tuple>(item);
    columns.push_back(column_of(pair[0], pair[1], owned, whole_row));
  }
  return columns;
}

py::bytes encode_example(py::handle features) {
  Owned owned;
  const std::vector<ColumnView> columns = columns_of(features, owned, true);
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
  const std::vector<ColumnView> views = columns_of(columns, owned, false);
  auto batch = std::make_shared<RecordBatch>();
  {
    py::gil_scoped_release release;
    tfr::encode_examples(views, num_rows, *batch);
  }
  return wrap_batch(std::move(batch));
}

py::object encode_sequence_examples(py::handle context, py::handle feature_lists, size_t num_rows) {
  Owned owned;
  const std::vector<ColumnView> views = columns_of(context, owned, false);
  std::vector<FeatureListView> lists;
  for (py::handle item : items_of(feature_lists, "feature_lists")) {
    auto pair = py::reinterpret_borrow<py::tuple>(item);
    FeatureListView l;
    l.steps.name = key_of(pair[0]);
    if (!PyTuple_Check(pair[1].ptr()) || py::len(pair[1]) != 2) {
      type_error(l.steps.name, "a feature list is a pair (steps column, step splits)");
    }
    auto entry = py::reinterpret_borrow<py::tuple>(pair[1]);
    l.steps = column_of(pair[0], entry[0], owned, false);
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
  const ColumnView view = column_of(name, column, owned, false);
  auto batch = std::make_shared<RecordBatch>();
  {
    py::gil_scoped_release release;
    tfr::encode_features(view, view.num_rows(), *batch);
  }
  return wrap_batch(std::move(batch));
}

}  // namespace

void register_encode(py::module_& m) {
  m.def("encode_example", &encode_example, py::arg("features"),
        "One serialized tf.train.Example from {name: (kind, values, offsets)}: each feature's\n"
        "values, all of them (see encode_examples for the tuple).");
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
