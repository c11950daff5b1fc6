// Helpers for the parsed columns of the Python layer (tfrec_fast.example.BytesColumn): loops over
// every value that would otherwise run in Python, a few hundred nanoseconds a value.
#include <cstdint>
#include <cstring>
#include <string>

#include "py_common.h"

namespace tfr::py_bind {
namespace {

using Offsets = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

// values[starts[j]:ends[j]] as bytes, for each j; a start of -1 gives `fallback` (a missing
// feature's default). Runs with the GIL held: nothing can change `values` meanwhile.
py::list bytes_values(const py::buffer& values, const Offsets& starts, const Offsets& ends,
                      const py::bytes& fallback) {
  const py::buffer_info info = values.request();
  if (info.ndim != 1 || info.strides[0] != info.itemsize) {
    throw py::value_error("values must be a contiguous 1-D buffer");
  }
  if (starts.ndim() != 1 || ends.ndim() != 1 || starts.size() != ends.size()) {
    throw py::value_error("starts and ends must be 1-D and of one length");
  }
  const auto* data = static_cast<const char*>(info.ptr);
  const int64_t size = int64_t(info.size * info.itemsize);
  const int64_t* s = starts.data();
  const int64_t* e = ends.data();
  const py::ssize_t n = starts.size();
  py::list out(n);
  for (py::ssize_t j = 0; j < n; ++j) {
    if (s[j] == -1) {
      PyList_SET_ITEM(out.ptr(), j, fallback.inc_ref().ptr());
      continue;
    }
    if (s[j] < 0 || s[j] > e[j] || e[j] > size) {
      throw py::index_error("value " + std::to_string(j) + " [" + std::to_string(s[j]) + ", " +
                            std::to_string(e[j]) + ") lies outside the " + std::to_string(size) +
                            "-byte buffer");
    }
    PyObject* item = PyBytes_FromStringAndSize(data + s[j], py::ssize_t(e[j] - s[j]));
    if (item == nullptr) throw py::error_already_set();
    PyList_SET_ITEM(out.ptr(), j, item);
  }
  return out;
}

// The values [starts[j], ends[j]) of `values` copied back to back into a new buffer (a start of -1,
// a missing feature's default, stays -1): (buffer, new starts, new ends). The ranges are checked
// first, the copy runs with the GIL released (`values` is held or copied by PyBytesView).
py::tuple gather_bytes(const py::object& values, const Offsets& starts, const Offsets& ends) {
  if (starts.ndim() != 1 || ends.ndim() != 1 || starts.size() != ends.size()) {
    throw py::value_error("starts and ends must be 1-D and of one length");
  }
  const PyBytesView source(values);
  const auto size = int64_t(source.size());
  const py::ssize_t n = starts.size();
  const int64_t* s = starts.data();
  const int64_t* e = ends.data();
  py::array_t<int64_t> new_starts(n), new_ends(n);
  int64_t* ns = new_starts.mutable_data();
  int64_t* ne = new_ends.mutable_data();
  int64_t total = 0;
  for (py::ssize_t j = 0; j < n; ++j) {
    if (s[j] == -1) {
      ns[j] = ne[j] = -1;
      continue;
    }
    if (s[j] < 0 || s[j] > e[j] || e[j] > size) {
      throw py::index_error("value " + std::to_string(j) + " [" + std::to_string(s[j]) + ", " +
                            std::to_string(e[j]) + ") lies outside the " + std::to_string(size) +
                            "-byte buffer");
    }
    ns[j] = total;
    total += e[j] - s[j];
    ne[j] = total;
  }
  py::array_t<uint8_t> out(total);
  uint8_t* to = out.mutable_data();
  {
    py::gil_scoped_release release;
    for (py::ssize_t j = 0; j < n; ++j) {
      if (ns[j] >= 0 && ne[j] > ns[j])
        std::memcpy(to + ns[j], source.data() + s[j], size_t(ne[j] - ns[j]));
    }
  }
  return py::make_tuple(out, new_starts, new_ends);
}

}  // namespace

void register_columns(py::module_& m) {
  m.def("bytes_values", &bytes_values, py::arg("values"), py::arg("starts"), py::arg("ends"),
        py::arg("fallback"),
        "[bytes(values[starts[j]:ends[j]]) for j] (a start of -1: fallback), every range\n"
        "checked against the buffer.");
  m.def("gather_bytes", &gather_bytes, py::arg("values"), py::arg("starts"), py::arg("ends"),
        "(buffer, starts, ends): the values [starts[j], ends[j]) copied back to back into a new\n"
        "uint8 array and their places in it (a start of -1 stays -1), every range checked\n"
        "against the buffer; the copy runs with the GIL released.");
}

}  // namespace tfr::py_bind
