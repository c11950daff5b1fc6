// CRC32C for Python: plain, masked, and per backend for tests and benchmarks.
#include <pybind11/stl.h>

#include "crc32c.h"
#include "py_common.h"

namespace tfr::py_bind {
namespace {

constexpr size_t kReleaseGilAbove = 64 * 1024;  // below this, releasing the GIL costs more

template <typename F>
uint32_t with_bytes(py::handle data, F f) {
  PyBytesView view(data);
  if (view.size() < kReleaseGilAbove) return f(view.data(), view.size());
  py::gil_scoped_release release;
  return f(view.data(), view.size());
}

}  // namespace

void register_crc(py::module_& m) {
  m.def(
      "crc32c",
      [](py::handle data, uint32_t value) {
        return with_bytes(data,
                          [&](const uint8_t* p, size_t n) { return crc32c_extend(value, p, n); });
      },
      py::arg("data"), py::arg("value") = 0,
      "CRC32C (Castagnoli) of a bytes-like object, extending `value`.");
  m.def(
      "masked_crc32c",
      [](py::handle data) {
        return with_bytes(data,
                          [](const uint8_t* p, size_t n) { return crc32c_mask(crc32c(p, n)); });
      },
      py::arg("data"), "The masked CRC32C that TFRecord stores.");
  m.def(
      "crc32c_backend", [] { return std::string(crc32c_backend()); },
      "The CRC32C backend in use: 'avx512', 'sse42', 'arm64' or 'portable'.");
  m.def("crc32c_backends", &crc32c_available_backends, "The backends this CPU can run.");
  m.def(
      "crc32c_with",
      [](const std::string& backend, py::handle data, uint32_t value) {
        return with_bytes(data, [&](const uint8_t* p, size_t n) {
          return crc32c_extend_with(backend, value, p, n);
        });
      },
      py::arg("backend"), py::arg("data"), py::arg("value") = 0,
      "CRC32C computed by one named backend (for tests and benchmarks).");
}

}  // namespace tfr::py_bind
