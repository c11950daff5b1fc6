// Helpers for the parsed columns of the Python layer (tfrec_fast.example.BytesColumn): loops over
// every value that would otherwise run in Python, a few hundred nanoseconds a value.
#include <cstdint>
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

}  // namespace

void register_columns(py::module_& m) {
  m.def("bytes_values", &bytes_values, py::arg("values"), py::arg("starts"), py::arg("ends"),
        py::arg("fallback"),
        "[bytes(values[starts[j]:ends[j]]) for j] (a start of -1: fallback), every range\n"
        "checked against the buffer.");
}

}  // namespace tfr::py_bind
