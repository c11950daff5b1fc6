// The extension module: registers each domain's bindings and translates C++ errors to Python,
// in one table:
//   PythonError (a Python error caught in C++)  -> that Python exception, unchanged
//   DataLoss                                     -> tfrec_fast.errors.DataLossError
//   ParseError                                   -> tfrec_fast.errors.ExampleParseError
//   IoError                                      -> OSError(errno, text): FileNotFoundError, ...
//   std::out_of_range                            -> IndexError
//   std::invalid_argument, other std::logic_error (misuse: bad arguments, a closed writer)
//                                                -> ValueError
//   std::bad_alloc                               -> MemoryError (pybind11's own translator)
#include <cerrno>

#include "errors.h"
#include "example_decoder.h"
#include "py_common.h"
#include "record_format.h"

namespace tfr::py_bind {
namespace {

void raise_data_loss(const DataLoss& e) {
  py::object err = data_loss_error(e);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(err.ptr())), err.ptr());
}

// IoError -> OSError(errno, text): Python picks FileNotFoundError, PermissionError, ...
void raise_io_error(const IoError& e) {
  py::object err = py::reinterpret_steal<py::object>(
      PyObject_CallFunction(PyExc_OSError, "is", e.err, e.what()));
  if (err) PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(err.ptr())), err.ptr());
}

void raise_parse_error(const ParseError& e) {
  py::object cls = py::module_::import("tfrec_fast.errors").attr("ExampleParseError");
  py::object err = cls(
      e.what(), py::arg("path") = e.source.empty() ? "<records>" : e.source,
      py::arg("record_index") = e.record_index,
      py::arg("feature") = e.has_feature ? py::object(py::str(e.feature)) : py::object(py::none()));
  PyErr_SetObject(cls.ptr(), err.ptr());
}

void translate(std::exception_ptr p) {
  try {
    std::rethrow_exception(p);
  } catch (const PythonError& e) {
    e.restore();
  } catch (const DataLoss& e) {
    raise_data_loss(e);
  } catch (const ParseError& e) {
    raise_parse_error(e);
  } catch (const IoError& e) {
    raise_io_error(e);
  } catch (const std::out_of_range& e) {
    PyErr_SetString(PyExc_IndexError, e.what());
  } catch (const std::logic_error& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  }
}

}  // namespace

void refuse_unbuilt(py::handle src, const py::detail::type_info* type) {
  if (!src || type == nullptr || !PyObject_TypeCheck(src.ptr(), type->type)) return;  // not ours
  auto v_h = reinterpret_cast<py::detail::instance*>(src.ptr())->get_value_and_holder(type, false);
  if (v_h.inst != nullptr && v_h.value_ptr() == nullptr)
    throw_unbuilt(src);  // (v_h's bool: value_ptr())
}

void throw_unbuilt(py::handle self) {
  throw py::type_error(std::string(Py_TYPE(self.ptr())->tp_name) +
                       " object is not initialized: it was made by __new__ without __init__");
}

PythonError::PythonError(const py::error_already_set& e)
    : value_(new py::object(e.value()),
             [](py::object* p) {
               py::gil_scoped_acquire gil;
               delete p;
             }),
      what_(e.what()) {}

void PythonError::restore() const {
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(value_->ptr())), value_->ptr());
}

py::object data_loss_error(const DataLoss& e) {
  py::object cls = py::module_::import("tfrec_fast.errors").attr("DataLossError");
  return cls(e.detail, py::arg("path") = e.source, py::arg("record_index") = e.record_index,
             py::arg("offset") = e.offset, py::arg("reason") = reason_code(e.reason));
}

bool immutable_buffer(py::handle obj) {
  for (int depth = 0; depth < 16 && obj; ++depth) {  // bounded: a view of a view of ...
    if (PyBytes_CheckExact(obj.ptr()) || py::isinstance<RecordBatch>(obj)) return true;
    if (PyMemoryView_Check(obj.ptr())) {
      obj = PyMemoryView_GET_BUFFER(obj.ptr())->obj;
    } else if (py::isinstance<py::array>(obj)) {
      auto array = py::reinterpret_borrow<py::array>(obj);
      if (array.writeable()) return false;
      obj = array.base();
    } else {
      return false;
    }
  }
  return false;
}

PyBytesView::PyBytesView(py::handle obj, size_t alignment) {
  if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
    throw py::error_already_set();
  }
  size_ = size_t(view_.len);
  format_ = view_.format ? view_.format : "B";
  itemsize_ = size_t(view_.itemsize);
  if (immutable_buffer(obj) && reinterpret_cast<uintptr_t>(view_.buf) % alignment == 0) {
    data_ = static_cast<const uint8_t*>(view_.buf);
    return;
  }
  const auto* bytes = static_cast<const uint8_t*>(view_.buf);
  copy_.assign(bytes, bytes + size_);
  static const uint8_t kNothing = 0;  // never a null pointer, even for 0 bytes
  data_ = size_ ? copy_.data() : &kNothing;
  PyBuffer_Release(&view_);
  view_ = Py_buffer{};
}

PyBytesView::~PyBytesView() {
  if (view_.obj != nullptr) PyBuffer_Release(&view_);
}

Compression parse_compression(const std::string& name) {
  if (name.empty()) return Compression::kNone;
  if (name == "gzip") return Compression::kGzip;
  if (name == "zlib") return Compression::kZlib;
  throw std::invalid_argument("unknown compression '" + name + "' (use None, 'gzip' or 'zlib')");
}

// object.__reduce__, and pickle's protocols 0 and 1, reduce an object by building its first
// built-in base, pybind11_object, and that aborts the process (pybind11 throws out of its
// tp_new). So every class of the module reduces as protocol 2 would, whatever the protocol: by
// the state its own __getstate__ gives (an enum's value, a Python subclass's), restored by
// __setstate__; a class with none (the engine's objects) cannot be pickled. A subclass may
// still define __reduce__ or __reduce_ex__ of its own.
void define_reduce(py::module_& m) {
  py::object newobj = py::module_::import("copyreg").attr("__newobj__");
  py::object default_getstate =
      py::getattr(py::module_::import("builtins").attr("object"), "__getstate__", py::none());
  for (auto item : py::reinterpret_borrow<py::dict>(m.attr("__dict__"))) {
    if (!PyType_Check(item.second.ptr())) continue;
    if (py::detail::get_type_info(reinterpret_cast<PyTypeObject*>(item.second.ptr())) == nullptr) {
      continue;  // not a pybind11 class
    }
    py::object cls = py::reinterpret_borrow<py::object>(item.second);
    cls.attr("__reduce__") = py::cpp_function(
        [newobj, default_getstate](py::handle self) -> py::object {
          py::handle type = py::type::handle_of(self);
          py::object getstate = py::getattr(type, "__getstate__", py::none());
          if (getstate.is_none() || getstate.is(default_getstate)) {
            throw py::type_error("cannot pickle '" + std::string(Py_TYPE(self.ptr())->tp_name) +
                                 "' object");
          }
          return py::make_tuple(newobj, py::make_tuple(type), getstate(self));
        },
        py::is_method(cls));
    cls.attr("__reduce_ex__") =
        py::cpp_function([](py::handle self, py::handle) { return self.attr("__reduce__")(); },
                         py::is_method(cls), py::arg("protocol"));
  }
}

}  // namespace tfr::py_bind

PYBIND11_MODULE(_core, m) {
  using namespace tfr::py_bind;
  m.doc() = "tfrec_fast's C++ record engine (private: use the tfrec_fast package)";
  m.attr("FRAMING_SIZE") = tfr::kFramingSize;  // bytes around each payload: length, 2 CRCs
  py::register_exception_translator(&translate);
  register_kinds(m);
  register_crc(m);
  register_batch(m);
  register_reader(m);
  register_writer(m);
  register_encode(m);
  register_example(m);
  register_index(m);
  register_columns(m);
  define_reduce(m);  // last: every class is registered
}
