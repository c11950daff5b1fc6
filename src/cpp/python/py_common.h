// Shared by the binding files: the pybind11 glue between the record engine and Python.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "errors.h"
#include "example_decoder.h"
#include "record_reader.h"
#include "sources.h"

namespace tfr::py_bind {

namespace py = pybind11;

// The bytes of any bytes-like object, safe to read with the GIL released for as long as this
// lives: memory nobody can change (a bytes object, a RecordBatch, views of them) is held by
// reference; anything else (bytearray, writable numpy, mmap, ...) is copied here, with the GIL
// held, because another thread could change it while C++ reads it. Memory held by reference
// starts at a multiple of `alignment` (else it is copied too, so typed elements can be read in
// place). Needs the GIL to construct.
class PyBytesView {
 public:
  explicit PyBytesView(py::handle obj, size_t alignment = 1);
  ~PyBytesView();
  PyBytesView(const PyBytesView&) = delete;
  PyBytesView& operator=(const PyBytesView&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // The elements as the exporter describes them: a struct-module format ("B" when it gives
  // none) and the size of one element.
  const std::string& format() const { return format_; }
  size_t itemsize() const { return itemsize_; }

 private:
  Py_buffer view_{};           // held only when the memory is immutable
  std::vector<uint8_t> copy_;  // otherwise the bytes live here
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string format_;
  size_t itemsize_ = 1;
};

// True when obj's memory can never change while obj lives: bytes, a RecordBatch, or a memoryview
// or read-only numpy array whose memory comes from one of those.
bool immutable_buffer(py::handle obj);

// An exception raised by Python code the engine called (a file-like source or sink). It keeps
// the exception object, so a reader can raise the very same exception again on every later call
// (pybind11's error_already_set can be restored only once; a second time aborts the process).
class PythonError : public std::exception {
 public:
  explicit PythonError(const py::error_already_set& e);  // needs the GIL
  const char* what() const noexcept override { return what_.c_str(); }
  void restore() const;  // sets the Python error indicator; needs the GIL

 private:
  std::shared_ptr<py::object> value_;  // released with the GIL held, wherever the last copy dies
  std::string what_;
};

// Runs f (which calls into Python, GIL held), turning a Python exception into a PythonError.
template <typename F>
auto call_python(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const py::error_already_set& e) {
    throw PythonError(e);
  }
}

// DataLoss -> a tfrec_fast.errors.DataLossError instance (an OSError) with the fields users
// inspect.
py::object data_loss_error(const DataLoss& e);

// "" / "gzip" / "zlib" as the Python layer normalised them.
Compression parse_compression(const std::string& name);

// Wraps a batch for Python; its numpy arrays and memoryviews keep it alive.
py::object wrap_batch(std::shared_ptr<RecordBatch> batch);

// A read-only memoryview of payload i of the batch exported by `base_view`'s owner.
py::object record_view(const py::object& base_view, const RecordBatch& batch, size_t i);
py::object record_bytes(const RecordBatch& batch, size_t i);

// `Cls.__new__(Cls)` makes a pybind11 instance whose C++ value was never built, and pybind11
// (<= 3.1, its issue #6153) would hand raw memory to the first method called on it. Raises
// TypeError instead when `src` is such an instance of `type` (a null value pointer: a built
// instance, owned or not, always has one, because every cast to C++ goes through this check).
void refuse_unbuilt(py::handle src, const py::detail::type_info* type);
[[noreturn]] void throw_unbuilt(py::handle self);

// The value behind `self`, for the type slots written by hand (they bypass pybind11's casts, so
// they make the same check themselves). TypeError for a __new__-only instance.
template <typename T>
T& built_value(PyObject* self) {
  auto v_h = reinterpret_cast<py::detail::instance*>(self)->get_value_and_holder();
  if (!v_h.holder_constructed()) throw_unbuilt(self);
  return *v_h.value_ptr<T>();
}

// pybind11's caster for a bound class, with the check above: every method, property and argument
// of that class loads through it. Installed per class by TFR_BUILT_ONLY.
template <typename T>
class built_only_caster : public py::detail::type_caster_base<T> {
 public:
  bool load(py::handle src, bool convert) {
    refuse_unbuilt(src, this->typeinfo);
    return py::detail::type_caster_base<T>::load(src, convert);
  }
};

void register_crc(py::module_& m);
void register_batch(py::module_& m);
void register_reader(py::module_& m);
void register_writer(py::module_& m);
void register_kinds(py::module_& m);  // Kind and Layout: first, the others' signatures use them
void register_encode(py::module_& m);
void register_example(py::module_& m);
void register_index(py::module_& m);
void register_columns(py::module_& m);

}  // namespace tfr::py_bind

// At global scope, after T is complete and before anything casts it.
#define TFR_BUILT_ONLY(T)                                              \
  namespace pybind11::detail {                                         \
  template <>                                                          \
  class type_caster<T> : public tfr::py_bind::built_only_caster<T> {}; \
  }

// (Not the enums Kind and Layout: pybind11 3 casts them through casters of its own. A
// __new__-only enum holds an unset byte, which every decoder and encoder call refuses.)
TFR_BUILT_ONLY(tfr::RecordBatch)
TFR_BUILT_ONLY(tfr::BufferPool)
TFR_BUILT_ONLY(tfr::FieldSpec)
