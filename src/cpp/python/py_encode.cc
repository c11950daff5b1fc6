// tf.train.Example encoding for Python: converts Python values and numpy columns into
// example::Column views (under the GIL), then encodes with the GIL released for batches.
//
// Value rules (see tfrec_fast/encode.py for the user-facing statement):
//   int, bool, numpy integer/bool scalar or array  -> int64_list  (range checked)
//   float, numpy floating scalar or array           -> float_list  (rounded to float32)
//   bytes, str (UTF-8), bytearray, memoryview,
//   numpy S/U arrays, object arrays of those        -> bytes_list
//   list/tuple of one of those kinds                -> that kind (mixing kinds or nesting is an error)
//   Int64s/Floats/Bytes(x) (attribute _tfrec_kind)   -> x forced to that kind
//   Partial(column, present) (attribute _tfrec_partial) -> column, left out of the records where
//                                                        present is false (columns only)
//   an object of a class named "Feature" with SerializeToString -> embedded as is
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "example_encoder.h"
#include "py_common.h"

namespace tfr::py_bind {
namespace {

using example::BytesRef;
using example::Column;
using example::Kind;

py::handle numpy() {
  static PyObject* np = py::module_::import("numpy").release().ptr();  // leaked on purpose
  return np;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kInt64: return "int64";
    case Kind::kFloat: return "float";
    case Kind::kBytes: return "bytes";
    case Kind::kFeature: return "Feature";
  }
  return "?";
}

// Where a value came from, for error messages: "feature 'x'" or "feature 'x', row 3".
struct Where {
  const std::string& name;
  py::ssize_t row = -1;
  std::string str() const {
    std::string s = "feature '" + name + "'";
    if (row >= 0) s += ", row " + std::to_string(row);
    return s;
  }
};

[[noreturn]] void raise(PyObject* type, const Where& w, const std::string& what) {
  PyErr_SetString(type, (w.str() + ": " + what).c_str());
  throw py::error_already_set();
}

std::string type_name(py::handle v) { return Py_TYPE(v.ptr())->tp_name; }

// Converted values and what keeps their memory alive.
struct Pools {
  std::vector<int64_t> int64s;
  std::vector<float> floats;
  std::vector<BytesRef> bytes;
  std::vector<py::object> keep;
  std::vector<std::unique_ptr<PyBytesView>> views;
};

size_t pool_size(const Pools& p, Kind kind) {
  switch (kind) {
    case Kind::kInt64: return p.int64s.size();
    case Kind::kFloat: return p.floats.size();
    default: return p.bytes.size();
  }
}

// One row's values as appended to the pools.
struct Appended {
  bool typed;  // false for an empty plain list: it takes the column's kind
  Kind kind;
  size_t begin, end;
};

bool is_bytes_like(py::handle v) {
  return PyBytes_Check(v.ptr()) || PyUnicode_Check(v.ptr()) || PyByteArray_Check(v.ptr()) ||
         PyMemoryView_Check(v.ptr());
}

// A typed wrapper (Int64s/Floats/Bytes): returns true and sets kind.
bool wrapper_kind(py::handle v, Kind& kind) {
  PyObject* attr = PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(v.ptr())), "_tfrec_kind");
  if (attr == nullptr) {
    PyErr_Clear();
    return false;
  }
  auto k = py::reinterpret_steal<py::object>(attr);
  if (!PyUnicode_Check(attr)) return false;
  const std::string s = k.cast<std::string>();
  if (s == "int64") kind = Kind::kInt64;
  else if (s == "float") kind = Kind::kFloat;
  else if (s == "bytes") kind = Kind::kBytes;
  else return false;
  return true;
}

bool is_feature_message(py::handle v) {
  if (!PyObject_HasAttrString(v.ptr(), "SerializeToString")) return false;
  auto name = py::reinterpret_steal<py::object>(
      PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(v.ptr())), "__name__"));
  if (!name) {
    PyErr_Clear();
    return false;
  }
  return PyUnicode_Check(name.ptr()) && name.cast<std::string>() == "Feature";
}

bool is_numpy_scalar(py::handle v) {
  return !py::isinstance<py::array>(v) && PyObject_HasAttrString(v.ptr(), "dtype") &&
         PyObject_HasAttrString(v.ptr(), "item");
}

char dtype_kind(py::handle v) {  // numpy scalar or array
  return py::str(v.attr("dtype").attr("kind")).cast<std::string>()[0];
}

// The bytes of a value, valid while `p` lives: bytes and str objects are held by a reference
// (the container they came from may drop them while the encoder runs without the GIL).
BytesRef bytes_of(Pools& p, py::handle v, const Where& w) {
  if (PyBytes_Check(v.ptr())) {
    p.keep.push_back(py::reinterpret_borrow<py::object>(v));
    return {reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(v.ptr())), size_t(PyBytes_GET_SIZE(v.ptr()))};
  }
  if (PyUnicode_Check(v.ptr())) {
    py::ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(v.ptr(), &n);  // cached in the str object
    if (s == nullptr) raise(PyExc_ValueError, w, "str is not encodable as UTF-8");
    p.keep.push_back(py::reinterpret_borrow<py::object>(v));
    return {reinterpret_cast<const uint8_t*>(s), size_t(n)};
  }
  // bytearray / memoryview / numpy: an owning view (copied unless immutable)
  p.views.push_back(std::make_unique<PyBytesView>(v));
  return {p.views.back()->data(), p.views.back()->size()};
}

int64_t int64_of(py::handle v, const Where& w) {
  py::object as_int;
  PyObject* o = v.ptr();
  if (!PyLong_Check(o)) {  // a numpy integer/bool scalar
    as_int = py::reinterpret_steal<py::object>(PyNumber_Long(o));
    if (!as_int) throw py::error_already_set();
    o = as_int.ptr();
  }
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (overflow != 0) {
    raise(PyExc_OverflowError, w, "int " + py::repr(o).cast<std::string>() + " out of int64 range");
  }
  if (x == -1 && PyErr_Occurred()) throw py::error_already_set();
  return int64_t(x);
}

float float_of(py::handle v) {
  const double d = PyFloat_AsDouble(v.ptr());
  if (d == -1.0 && PyErr_Occurred()) throw py::error_already_set();
  return static_cast<float>(d);  // as protobuf does: nearest float32, inf beyond its range
}

// The kind a plain scalar suggests, or false when it is no scalar we take.
bool scalar_kind(py::handle v, Kind& kind) {
  PyObject* o = v.ptr();
  if (PyLong_Check(o)) kind = Kind::kInt64;
  else if (PyFloat_Check(o)) kind = Kind::kFloat;
  else if (is_bytes_like(v)) kind = Kind::kBytes;
  else if (is_numpy_scalar(v)) {
    switch (dtype_kind(v)) {
      case 'b': case 'i': case 'u': kind = Kind::kInt64; break;
      case 'f': kind = Kind::kFloat; break;
      case 'S': case 'U': kind = Kind::kBytes; break;
      default: return false;
    }
  } else {
    return false;
  }
  return true;
}

// Appends one scalar as `kind`; the caller checked it is of a compatible kind.
void append_scalar(Pools& p, py::handle v, Kind kind, const Where& w) {
  switch (kind) {
    case Kind::kInt64: p.int64s.push_back(int64_of(v, w)); break;
    case Kind::kFloat: p.floats.push_back(float_of(v)); break;
    default: p.bytes.push_back(bytes_of(p, v, w)); break;
  }
}

// `have` may be stored as `want`? Ints may become floats only when forced (Floats([...])).
bool compatible(Kind have, Kind want, bool forced) {
  return have == want || (forced && have == Kind::kInt64 && want == Kind::kFloat);
}

// A copy of a C-contiguous array made with one memcpy while the GIL is held, so no Python thread
// changes it halfway (numpy's own copy may release the GIL).
py::array copied(const py::array& a) {
  py::array out(a.dtype(), std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
  if (a.nbytes()) std::memcpy(out.mutable_data(), a.data(), size_t(a.nbytes()));
  return out;
}

// Whether `out` (from numpy's conversion of `arr`) still uses the caller's memory.
bool borrows(const py::array& out, py::handle arr) {
  return out.ptr() == arr.ptr() || out.base().ptr() == arr.ptr();
}

// A C-contiguous, aligned, native-order array of T with the values of `arr` (numpy casts),
// owned: encoding reads every value twice (sizes, then bytes) with the GIL released, so the
// caller's memory is copied here unless nothing can change it (a view of bytes, say).
template <typename T>
py::array_t<T> as_contiguous(py::handle arr) {
  auto out = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(arr);
  if (!out) throw py::error_already_set();
  if (reinterpret_cast<uintptr_t>(out.data()) % alignof(T) != 0) {
    out = py::array_t<T, py::array::c_style | py::array::forcecast>(
        numpy().attr("array")(out, py::arg("copy") = true));
  } else if (borrows(out, arr) && !immutable_buffer(out)) {
    out = py::array_t<T, py::array::c_style | py::array::forcecast>(copied(out));
  }
  return out;
}

// A numeric array's values as int64 (uint64 range-checked): pointer valid while the result lives.
py::array int64_array(py::handle arr, const Where& w) {
  const auto dt = py::array::ensure(arr).dtype();
  if (dt.kind() == 'u' && dt.itemsize() == 8) {
    auto u = as_contiguous<uint64_t>(arr);
    const uint64_t* d = u.data();
    for (py::ssize_t k = 0; k < u.size(); ++k) {
      if (d[k] > uint64_t(INT64_MAX)) {
        raise(PyExc_OverflowError, w, "uint64 value " + std::to_string(d[k]) + " out of int64 range");
      }
    }
    return u;  // same bits as int64
  }
  return as_contiguous<int64_t>(arr);
}

// `arr` in C order, owned (copied unless its memory cannot change; see as_contiguous).
py::array owned_contiguous(py::handle arr) {
  py::array a = numpy().attr("ascontiguousarray")(arr);
  return borrows(a, arr) && !immutable_buffer(a) ? copied(a) : a;
}

// Raw bytes of `arr` (C order) as one value per `chunk` bytes.
void append_raw_chunks(Pools& p, py::handle arr, size_t num_chunks) {
  py::array a = owned_contiguous(arr);
  const auto* base = static_cast<const uint8_t*>(a.data());
  const size_t nbytes = size_t(a.nbytes());
  const size_t chunk = num_chunks ? nbytes / num_chunks : 0;
  for (size_t i = 0; i < num_chunks; ++i) p.bytes.push_back({base + i * chunk, chunk});
  p.keep.push_back(std::move(a));
}

// Elements of a fixed-width bytes ('S') array, trailing NULs stripped as numpy does.
void append_fixed_bytes(Pools& p, py::handle arr) {
  py::array a = owned_contiguous(arr);
  const auto* base = static_cast<const uint8_t*>(a.data());
  const size_t width = size_t(a.itemsize());
  for (py::ssize_t k = 0; k < a.size(); ++k) {
    const uint8_t* s = base + size_t(k) * width;
    size_t len = width;
    while (len > 0 && s[len - 1] == 0) --len;
    p.bytes.push_back({s, len});
  }
  p.keep.push_back(std::move(a));
}

Appended append_sequence(Pools& p, py::handle seq, const Kind* forced, const Where& w);

// Appends a numpy array's values (flattened, C order).
Appended append_array(Pools& p, py::handle obj, const Kind* forced, const Where& w) {
  py::array arr = py::array::ensure(obj);
  const char k = arr.dtype().kind();
  const bool numeric = k == 'b' || k == 'i' || k == 'u' || k == 'f';
  if (k == 'O' || k == 'U') {
    py::object flat = arr.attr("ravel")().attr("tolist")();
    p.keep.push_back(flat);
    if (k == 'O') return append_sequence(p, flat, forced, w);
    const Kind bytes = Kind::kBytes;
    if (forced && *forced != bytes) raise(PyExc_TypeError, w, "a str array cannot be " + std::string(kind_name(*forced)));
    return append_sequence(p, flat, &bytes, w);
  }
  if (forced && *forced == Kind::kBytes) {
    const size_t b = p.bytes.size();
    if (k == 'S') append_fixed_bytes(p, arr);
    else append_raw_chunks(p, arr, 1);  // Bytes(array): the array's raw bytes as one value
    return {true, Kind::kBytes, b, p.bytes.size()};
  }
  if (k == 'S') {
    if (forced) raise(PyExc_TypeError, w, "a bytes array cannot be " + std::string(kind_name(*forced)));
    const size_t b = p.bytes.size();
    append_fixed_bytes(p, arr);
    return {true, Kind::kBytes, b, p.bytes.size()};
  }
  if (!numeric) {
    raise(PyExc_TypeError, w, "unsupported numpy dtype " + py::str(arr.dtype()).cast<std::string>());
  }
  Kind kind = (k == 'f') ? Kind::kFloat : Kind::kInt64;
  if (forced) {
    if (!compatible(kind, *forced, true)) {
      raise(PyExc_TypeError, w, "a floating array cannot be int64 (cast it first if that is meant)");
    }
    kind = *forced;
  }
  if (kind == Kind::kInt64) {
    py::array a = int64_array(arr, w);
    const auto* d = static_cast<const int64_t*>(a.data());
    const size_t b = p.int64s.size();
    p.int64s.insert(p.int64s.end(), d, d + a.size());
    return {true, kind, b, p.int64s.size()};
  }
  auto a = as_contiguous<float>(arr);
  const size_t b = p.floats.size();
  p.floats.insert(p.floats.end(), a.data(), a.data() + a.size());
  return {true, kind, b, p.floats.size()};
}

Appended append_sequence(Pools& p, py::handle seq, const Kind* forced, const Where& w) {
  py::object fast = py::reinterpret_steal<py::object>(PySequence_Fast(seq.ptr(), "not a sequence"));
  if (!fast) throw py::error_already_set();
  const py::ssize_t n = PySequence_Fast_GET_SIZE(fast.ptr());
  PyObject** items = PySequence_Fast_ITEMS(fast.ptr());
  if (n == 0 && !forced) return {false, Kind::kInt64, 0, 0};
  const bool is_forced = forced != nullptr;
  Kind kind{};
  if (forced) {
    kind = *forced;
  } else if (!scalar_kind(items[0], kind)) {
    kind = Kind::kInt64;  // element 0 is reported below
  }
  bool promoted = false;  // ints mixed with floats: a float list, as numpy and FloatList do
  if (!forced && kind == Kind::kInt64) {
    for (py::ssize_t i = 1; i < n && !promoted; ++i) {
      PyObject* o = items[i];
      if (PyLong_Check(o)) continue;
      Kind k{};
      promoted = PyFloat_Check(o) || (scalar_kind(o, k) && k == Kind::kFloat);
    }
    if (promoted) kind = Kind::kFloat;
  }
  const size_t b = pool_size(p, kind);
  for (py::ssize_t i = 0; i < n; ++i) {
    py::handle v = items[i];
    Kind have{};
    if (!scalar_kind(v, have)) {
      const bool nested = PyList_Check(v.ptr()) || PyTuple_Check(v.ptr()) || py::isinstance<py::array>(v);
      raise(PyExc_TypeError, w,
            std::string(nested ? "nested lists are not supported" : "unsupported list element") +
                " (element " + std::to_string(i) + " is " + type_name(v) + ")");
    }
    if (!compatible(have, kind, is_forced || promoted)) {
      raise(PyExc_TypeError, w,
            std::string("mixed kinds in a list: element ") + std::to_string(i) + " is " + kind_name(have) +
                ", expected " + kind_name(kind));
    }
    append_scalar(p, v, kind, w);
  }
  return {true, kind, b, pool_size(p, kind)};
}

// Appends one feature value of one row.
Appended append_value(Pools& p, py::handle v, const Kind* forced, const Where& w) {
  PyObject* o = v.ptr();
  Kind kind{};
  if (PyList_Check(o) || PyTuple_Check(o)) return append_sequence(p, v, forced, w);
  if (py::isinstance<py::array>(v)) return append_array(p, v, forced, w);
  if (scalar_kind(v, kind)) {
    if (!PyLong_Check(o) && !PyFloat_Check(o) && !is_bytes_like(v)) {  // a numpy scalar
      return append_array(p, numpy().attr("asarray")(v), forced, w);
    }
    if (forced) {
      if (!compatible(kind, *forced, true)) {
        raise(PyExc_TypeError, w, std::string("a ") + kind_name(kind) + " value cannot be " + kind_name(*forced));
      }
      kind = *forced;
    }
    const size_t b = pool_size(p, kind);
    append_scalar(p, v, kind, w);
    return {true, kind, b, b + 1};
  }
  Kind wrapped{};
  if (wrapper_kind(v, wrapped)) {
    if (forced && *forced != wrapped) {
      raise(PyExc_TypeError, w, std::string("conflicting kinds ") + kind_name(*forced) + " and " + kind_name(wrapped));
    }
    return append_value(p, v.attr("values"), &wrapped, w);
  }
  if (is_feature_message(v)) {
    if (forced) raise(PyExc_TypeError, w, "a Feature message cannot be wrapped in Int64s/Floats/Bytes");
    py::object s = v.attr("SerializeToString")();
    if (!PyBytes_Check(s.ptr())) raise(PyExc_TypeError, w, "SerializeToString() did not return bytes");
    p.keep.push_back(s);
    const size_t b = p.bytes.size();
    p.bytes.push_back(bytes_of(p, s, w));
    return {true, Kind::kFeature, b, b + 1};
  }
  if (v.is_none()) raise(PyExc_TypeError, w, "None is not a feature value (leave the feature out instead)");
  raise(PyExc_TypeError, w,
        "unsupported value of type " + type_name(v) +
            " (use int, float, bytes, str, a list of one of those, a numpy array, "
            "Int64s/Floats/Bytes(...) or a Feature message)");
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

// (key, value) pairs of a mapping, in its iteration order.
std::vector<std::pair<py::object, py::object>> items_of(py::handle mapping, const char* what) {
  std::vector<std::pair<py::object, py::object>> out;
  if (PyDict_Check(mapping.ptr())) {
    out.reserve(size_t(PyDict_Size(mapping.ptr())));
    PyObject *k, *v;
    py::ssize_t pos = 0;
    while (PyDict_Next(mapping.ptr(), &pos, &k, &v)) {
      out.emplace_back(py::reinterpret_borrow<py::object>(k), py::reinterpret_borrow<py::object>(v));
    }
    return out;
  }
  if (!PyObject_HasAttrString(mapping.ptr(), "items")) {
    throw py::type_error(std::string(what) + " must be a mapping of feature name to value, not " + type_name(mapping));
  }
  for (py::handle item : mapping.attr("items")()) {
    auto t = py::reinterpret_borrow<py::tuple>(item);
    out.emplace_back(t[0], t[1]);
  }
  return out;
}

py::bytes encode_example(py::handle features) {
  auto items = items_of(features, "features");
  Pools pools;
  std::vector<Column> columns(items.size());
  std::vector<int64_t> bounds(2 * items.size());
  for (size_t f = 0; f < items.size(); ++f) {
    Column& c = columns[f];
    c.name = key_of(items[f].first);
    const Where w{c.name};
    const Appended a = append_value(pools, items[f].second, nullptr, w);
    if (!a.typed) {
      raise(PyExc_ValueError, w,
            "an empty list has no kind: use tfrec_fast.Int64s([]), Floats([]) or Bytes([])");
    }
    c.kind = a.kind;
    bounds[2 * f] = int64_t(a.begin);
    bounds[2 * f + 1] = int64_t(a.end);
  }
  for (size_t f = 0; f < columns.size(); ++f) {  // the pools are complete: point into them
    Column& c = columns[f];
    c.int64s = pools.int64s.data();
    c.num_int64s = pools.int64s.size();
    c.floats = pools.floats.data();
    c.num_floats = pools.floats.size();
    c.bytes = pools.bytes.data();
    c.num_bytes = pools.bytes.size();
    c.begins = &bounds[2 * f];
    c.ends = &bounds[2 * f + 1];
  }
  std::vector<uint64_t> scratch;
  const size_t size = example::example_size(columns, 0, scratch);
  PyObject* out = PyBytes_FromStringAndSize(nullptr, py::ssize_t(size));
  if (out == nullptr) throw py::error_already_set();
  auto result = py::reinterpret_steal<py::bytes>(out);
  auto* dst = reinterpret_cast<uint8_t*>(PyBytes_AS_STRING(out));
  if (size >= (1 << 16)) {
    py::gil_scoped_release release;
    example::write_example(columns, 0, scratch, dst);
  } else {
    example::write_example(columns, 0, scratch, dst);
  }
  return result;
}

// ---- columnar ----

// One column's converted data; Column points into it (or into arrays it keeps).
struct ColumnData {
  Column col;
  Pools pools;
  std::vector<Kind> kinds;
  std::vector<int64_t> begins, ends;
  py::ssize_t rows = 0;
};

bool has_attr(py::handle v, const char* name) { return PyObject_HasAttrString(v.ptr(), name) != 0; }

// Rows = per-row values of a list (or of a 1-D object/str array).
void convert_rows(ColumnData& d, py::handle rows, const Kind* forced) {
  py::object fast = py::reinterpret_steal<py::object>(PySequence_Fast(rows.ptr(), "not a sequence"));
  if (!fast) throw py::error_already_set();
  const py::ssize_t n = PySequence_Fast_GET_SIZE(fast.ptr());
  PyObject** items = PySequence_Fast_ITEMS(fast.ptr());
  d.rows = n;
  d.kinds.resize(size_t(n));
  d.begins.resize(size_t(n));
  d.ends.resize(size_t(n));
  std::vector<uint8_t> untyped(static_cast<size_t>(n), 0);
  bool have_kind = forced != nullptr;
  Kind first = forced ? *forced : Kind::kInt64;
  bool uniform = true;
  for (py::ssize_t i = 0; i < n; ++i) {
    const Where w{d.col.name, i};
    const Appended a = append_value(d.pools, items[i], forced, w);
    d.begins[size_t(i)] = int64_t(a.begin);
    d.ends[size_t(i)] = int64_t(a.end);
    d.kinds[size_t(i)] = a.kind;
    if (!a.typed) {
      untyped[size_t(i)] = 1;
      continue;
    }
    if (!have_kind) {
      first = a.kind;
      have_kind = true;
    } else if (a.kind != first) {
      uniform = false;
    }
  }
  for (py::ssize_t i = 0; i < n; ++i) {
    if (!untyped[size_t(i)]) continue;
    if (!have_kind) {
      raise(PyExc_ValueError, Where{d.col.name},
            "only empty lists, so no kind: wrap the column in tfrec_fast.Int64s/Floats/Bytes");
    }
    d.kinds[size_t(i)] = first;  // an empty row: begin == end == 0 fits any kind
  }
  d.col.kind = first;
  if (!uniform) d.col.kinds = d.kinds.data();
  d.col.begins = d.begins.data();
  d.col.ends = d.ends.data();
  d.col.int64s = d.pools.int64s.data();
  d.col.num_int64s = d.pools.int64s.size();
  d.col.floats = d.pools.floats.data();
  d.col.num_floats = d.pools.floats.size();
  d.col.bytes = d.pools.bytes.data();
  d.col.num_bytes = d.pools.bytes.size();
}

// Flat values (of a Ragged) into the column's arrays, borrowing numpy memory where possible.
void convert_flat_values(ColumnData& d, py::handle values, const Kind* forced) {
  const Where w{d.col.name};
  if (py::isinstance<py::array>(values)) {
    py::array arr = py::array::ensure(values);
    const char k = arr.dtype().kind();
    const Kind want = forced ? *forced : (k == 'f' ? Kind::kFloat : Kind::kInt64);
    if ((k == 'b' || k == 'i' || k == 'u' || k == 'f') && want != Kind::kBytes) {
      if (k == 'f' && want == Kind::kInt64) raise(PyExc_TypeError, w, "a floating array cannot be int64");
      d.col.kind = want;
      if (want == Kind::kInt64) {
        py::array a = int64_array(arr, w);
        d.col.int64s = static_cast<const int64_t*>(a.data());
        d.col.num_int64s = size_t(a.size());
        d.pools.keep.push_back(std::move(a));
      } else {
        auto a = as_contiguous<float>(arr);
        d.col.floats = a.data();
        d.col.num_floats = size_t(a.size());
        d.pools.keep.push_back(std::move(a));
      }
      return;
    }
  }
  const Appended a = append_value(d.pools, values, forced, w);
  if (!a.typed) {
    raise(PyExc_ValueError, w, "empty values have no kind: wrap the column in tfrec_fast.Int64s/Floats/Bytes");
  }
  if (a.kind == Kind::kFeature) raise(PyExc_TypeError, w, "Ragged values cannot be a Feature message");
  d.col.kind = a.kind;
  d.col.int64s = d.pools.int64s.data();
  d.col.num_int64s = d.pools.int64s.size();
  d.col.floats = d.pools.floats.data();
  d.col.num_floats = d.pools.floats.size();
  d.col.bytes = d.pools.bytes.data();
  d.col.num_bytes = d.pools.bytes.size();
}

py::array_t<int64_t> int64_index_array(py::handle obj) { return as_contiguous<int64_t>(obj); }

void convert_column(ColumnData& d, py::handle col, const Kind* forced) {
  const Where w{d.col.name};
  Kind wrapped{};
  if (!py::isinstance<py::array>(col) && wrapper_kind(col, wrapped)) {
    if (forced && *forced != wrapped) raise(PyExc_TypeError, w, "conflicting kind wrappers");
    return convert_column(d, col.attr("values"), &wrapped);
  }
  if (!py::isinstance<py::array>(col) && has_attr(col, "_tfrec_partial")) {
    convert_column(d, col.attr("column"), forced);
    auto present = as_contiguous<uint8_t>(col.attr("present"));  // owned: read without the GIL
    if (present.ndim() != 1 || present.size() != d.rows) {
      raise(PyExc_ValueError, w, "Partial needs one `present` flag per row (" +
                                     std::to_string(d.rows) + "), not " + std::to_string(present.size()));
    }
    d.col.present = present.data();
    d.pools.keep.push_back(std::move(present));
    return;
  }
  if (has_attr(col, "starts") && has_attr(col, "ends") && has_attr(col, "values")) {
    // BytesColumn: value k = values[starts[k]:ends[k]]; rows by row_splits or one value per row.
    if (forced && *forced != Kind::kBytes) raise(PyExc_TypeError, w, "a BytesColumn holds bytes");
    auto data = as_contiguous<uint8_t>(col.attr("values"));
    auto starts = int64_index_array(col.attr("starts"));
    auto ends = int64_index_array(col.attr("ends"));
    if (starts.size() != ends.size()) raise(PyExc_ValueError, w, "BytesColumn starts and ends differ in length");
    const auto* base = data.data();
    for (py::ssize_t k = 0; k < starts.size(); ++k) {
      const int64_t s = starts.data()[k], e = ends.data()[k];
      if (s < 0 || e < s || e > data.size()) raise(PyExc_ValueError, w, "BytesColumn value out of bounds");
      d.pools.bytes.push_back({base + s, size_t(e - s)});
    }
    d.pools.keep.push_back(data);
    d.col.kind = Kind::kBytes;
    d.col.bytes = d.pools.bytes.data();
    d.col.num_bytes = d.pools.bytes.size();
    py::object splits = has_attr(col, "row_splits") ? py::object(col.attr("row_splits")) : py::none();
    if (splits.is_none()) {
      d.col.row_size = 1;
      d.rows = starts.size();
    } else {
      auto rs = int64_index_array(splits);
      if (rs.size() < 1) raise(PyExc_ValueError, w, "row_splits needs N + 1 entries");
      d.col.begins = rs.data();
      d.col.ends = rs.data() + 1;
      d.rows = rs.size() - 1;
      d.pools.keep.push_back(std::move(rs));
    }
    return;
  }
  if (!py::isinstance<py::array>(col) && has_attr(col, "values") && has_attr(col, "row_splits")) {
    // Ragged: row i = values[row_splits[i]:row_splits[i + 1]].
    auto rs = int64_index_array(col.attr("row_splits"));
    if (rs.ndim() != 1 || rs.size() < 1) raise(PyExc_ValueError, w, "row_splits needs N + 1 entries");
    convert_flat_values(d, col.attr("values"), forced);
    d.col.begins = rs.data();
    d.col.ends = rs.data() + 1;
    d.rows = rs.size() - 1;
    d.pools.keep.push_back(std::move(rs));
    return;
  }
  if (py::isinstance<py::array>(col)) {
    py::array arr = py::array::ensure(col);
    if (arr.ndim() == 0) raise(PyExc_ValueError, w, "a column needs a first dimension of N rows");
    const char k = arr.dtype().kind();
    const py::ssize_t n = arr.shape(0);
    if (k == 'O' || k == 'U') {  // per-row values
      py::list rows;
      for (py::ssize_t i = 0; i < n; ++i) rows.append(arr[py::int_(i)]);
      d.pools.keep.push_back(rows);
      return convert_rows(d, rows, forced);
    }
    d.rows = n;
    const size_t row_size = n ? size_t(arr.size() / n) : 0;
    if (forced && *forced == Kind::kBytes && k != 'S') {  // each row's raw bytes as one value
      append_raw_chunks(d.pools, arr, size_t(n));
      d.col.kind = Kind::kBytes;
      d.col.row_size = 1;
      d.col.bytes = d.pools.bytes.data();
      d.col.num_bytes = d.pools.bytes.size();
      return;
    }
    if (k == 'S') {
      if (forced && *forced != Kind::kBytes) raise(PyExc_TypeError, w, "a bytes array cannot be numeric");
      append_fixed_bytes(d.pools, arr);
      d.col.kind = Kind::kBytes;
      d.col.row_size = row_size;
      d.col.bytes = d.pools.bytes.data();
      d.col.num_bytes = d.pools.bytes.size();
      return;
    }
    convert_flat_values(d, arr, forced);
    d.col.row_size = row_size;
    return;
  }
  if (PyList_Check(col.ptr()) || PyTuple_Check(col.ptr())) return convert_rows(d, col, forced);
  raise(PyExc_TypeError, w,
        "unsupported column of type " + type_name(col) +
            " (use a numpy array [N, ...], a list of N row values, a Ragged or a BytesColumn)");
}

// Converts every column of a mapping (name -> column); all must have n rows (n < 0: the first
// column's count, written back).
std::vector<std::unique_ptr<ColumnData>> convert_columns(py::handle columns, py::ssize_t& n) {
  auto items = items_of(columns, "columns");
  std::vector<std::unique_ptr<ColumnData>> data;
  data.reserve(items.size());
  std::string first_name;
  for (auto& [key, value] : items) {
    auto d = std::make_unique<ColumnData>();
    d->col.name = key_of(key);
    convert_column(*d, value, nullptr);
    if (n < 0) {
      n = d->rows;
      first_name = d->col.name;
    } else if (d->rows != n) {
      throw py::value_error("column '" + d->col.name + "' has " + std::to_string(d->rows) + " rows, but " +
                            (first_name.empty() ? std::string("n is ")
                                                : "column '" + first_name + "' has ") +
                            std::to_string(n));
    }
    data.push_back(std::move(d));
  }
  return data;
}

std::vector<Column> columns_of(const std::vector<std::unique_ptr<ColumnData>>& data) {
  std::vector<Column> cols;
  cols.reserve(data.size());
  for (auto& d : data) cols.push_back(d->col);
  return cols;
}

py::object encode_examples(py::handle columns, py::object n_obj) {
  py::ssize_t n = n_obj.is_none() ? -1 : n_obj.cast<py::ssize_t>();
  if (n < -1) throw py::value_error("n must be >= 0");
  auto data = convert_columns(columns, n);
  if (n < 0) throw py::value_error("encode_examples needs n when there are no columns");
  const std::vector<Column> cols = columns_of(data);
  auto batch = std::make_shared<RecordBatch>();
  {
    py::gil_scoped_release release;
    example::encode_examples(cols, size_t(n), *batch);
  }
  return wrap_batch(std::move(batch));
}

// context: name -> column of N rows; lists: name -> (steps column of S rows, int64 splits [N + 1]).
py::object encode_sequence_examples(py::handle context, py::handle lists, py::ssize_t n) {
  if (n < 0) throw py::value_error("n must be >= 0");
  auto context_data = convert_columns(context, n);
  std::vector<std::unique_ptr<ColumnData>> step_data;
  std::vector<py::array_t<int64_t>> splits;  // owned copies (as_contiguous)
  for (auto& [key, value] : items_of(lists, "feature lists")) {
    auto pair = py::reinterpret_borrow<py::tuple>(value);
    auto d = std::make_unique<ColumnData>();
    d->col.name = key_of(key);
    convert_column(*d, pair[0], nullptr);
    auto rs = as_contiguous<int64_t>(pair[1]);
    if (rs.ndim() != 1 || rs.size() != n + 1) {
      raise(PyExc_ValueError, Where{d->col.name}, "step splits need N + 1 entries");
    }
    step_data.push_back(std::move(d));
    splits.push_back(std::move(rs));
  }
  const std::vector<Column> cols = columns_of(context_data);
  std::vector<example::FeatureListColumn> feature_lists;
  for (size_t j = 0; j < step_data.size(); ++j) {
    feature_lists.push_back({step_data[j]->col, splits[j].data(), size_t(step_data[j]->rows)});
  }
  auto batch = std::make_shared<RecordBatch>();
  {
    py::gil_scoped_release release;
    example::encode_sequence_examples(cols, feature_lists, size_t(n), *batch);
  }
  return wrap_batch(std::move(batch));
}

}  // namespace

void register_encode(py::module_& m) {
  m.def("encode_example", &encode_example, py::arg("features"),
        "Encodes a mapping of feature name -> value as one serialized tf.train.Example.");
  m.def("encode_sequence_examples", &encode_sequence_examples, py::arg("context"),
        py::arg("feature_lists"), py::arg("n"),
        "Encodes N SequenceExamples: context columns of N rows, and per feature list a column\n"
        "of steps plus N + 1 step splits.");
  m.def("encode_examples", &encode_examples, py::arg("columns"), py::arg("n") = py::none(),
        "Encodes columns (name -> column of N rows) as N serialized Examples in a RecordBatch.");
}

}  // namespace tfr::py_bind
