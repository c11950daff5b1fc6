// The record writer for Python: to a path or to a binary file-like object, GIL released for I/O.
#include <utility>
#include <vector>

#include "errors.h"
#include "py_common.h"
#include "record_writer.h"

namespace tfr::py_bind {
namespace {

// A Python binary file-like object. Writes come with the GIL released, so each call takes it.
// close() flushes but leaves the object open: it belongs to the caller.
class PySink final : public Sink {
 public:
  PySink(py::object file, std::string name) : Sink(std::move(name)), file_(std::move(file)) {}
  ~PySink() override {
    py::gil_scoped_acquire gil;
    file_ = py::object();
  }
  PySink(const PySink&) = delete;
  PySink& operator=(const PySink&) = delete;

  void write(const uint8_t* data, size_t n) override {
    py::gil_scoped_acquire gil;
    call_python([&] { write_locked(data, n); });
  }

  void write_locked(const uint8_t* data, size_t n) {
    while (n > 0) {
      auto view = py::reinterpret_steal<py::object>(PyMemoryView_FromMemory(
          reinterpret_cast<char*>(const_cast<uint8_t*>(data)), py::ssize_t(n), PyBUF_READ));
      py::object written = file_.attr("write")(view);
      view.attr("release")();
      // Raw files may write less than asked; buffered ones return None or n.
      size_t done = written.is_none() ? n : written.cast<size_t>();
      if (done == 0 || done > n) throw IoError(EIO, "write to '" + name() + "' made no progress");
      data += done;
      n -= done;
    }
  }

  void flush(bool sync) override {
    py::gil_scoped_acquire gil;
    call_python([&] { flush_locked(sync); });
  }

  void flush_locked(bool sync) {
    if (!file_ || !py::hasattr(file_, "flush")) return;
    file_.attr("flush")();
    if (sync && py::hasattr(file_, "fileno")) {
      py::module_::import("os").attr("fsync")(file_.attr("fileno")());
    }
  }

  void close() override { flush(false); }

 private:
  py::object file_;
};

class PyWriter {
 public:
  // python_sink: the sink calls Python, so the writer's mutex must never be awaited while holding
  // the GIL (the mutex holder may be waiting for the GIL inside the sink).
  PyWriter(std::unique_ptr<Sink> sink, size_t buffer_size, bool python_sink)
      : writer_(std::make_unique<RecordWriter>(std::move(sink), buffer_size)),
        python_sink_(python_sink) {}

  void write(py::handle record) {
    if (PyBytes_CheckExact(record.ptr())) {  // immutable, and the caller holds it: no view needed
      write_bytes(as_bytes(record));
      return;
    }
    PyBytesView view(record);
    write_bytes({view.data(), view.size()});
  }

  void write_batch(py::handle records) {
    if (py::isinstance<RecordBatch>(records)) {
      const auto& batch = records.cast<const RecordBatch&>();
      py::gil_scoped_release release;
      writer_->write_batch(batch.data.data(), batch.offsets.data(), batch.size());
      return;
    }
    // Any iterable of bytes-like objects, taken in chunks so a long generator is never held
    // whole, and written a chunk at a time without the GIL. bytes objects are immutable: a
    // reference keeps each where it is. Anything else is held by a view, which copies what
    // could change (a bytearray a generator refills, say), so each record keeps its contents.
    constexpr size_t kChunk = 4096;
    std::vector<RecordWriter::View> chunk;
    std::vector<py::object> held;
    std::vector<std::unique_ptr<PyBytesView>> views;
    auto write_chunk = [&] {
      {
        py::gil_scoped_release release;
        writer_->write_all(chunk.data(), chunk.size());
      }
      chunk.clear();
      held.clear();
      views.clear();
    };
    for (py::handle record : py::iter(records)) {
      if (PyBytes_CheckExact(record.ptr())) {
        chunk.push_back(as_bytes(record));
        held.push_back(py::reinterpret_borrow<py::object>(record));
      } else {
        views.push_back(std::make_unique<PyBytesView>(record));
        chunk.push_back({views.back()->data(), views.back()->size()});
      }
      if (chunk.size() == kChunk) write_chunk();
    }
    write_chunk();
  }

  void flush(bool sync) {
    py::gil_scoped_release release;
    writer_->flush(sync);
  }

  void close() {
    py::gil_scoped_release release;
    writer_->close();
  }

  uint64_t records_written() const { return writer_->records_written(); }

 private:
  static RecordWriter::View as_bytes(py::handle bytes) {
    return {reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(bytes.ptr())),
            size_t(PyBytes_GET_SIZE(bytes.ptr()))};
  }

  // The record's memory stays valid and unchanged for the call (see write()).
  void write_bytes(RecordWriter::View record) {
    // A copy into the buffer keeps the GIL (cheaper than releasing it); anything that could
    // wait (I/O, or another thread's flush holding the writer) runs without it.
    if (!python_sink_ && writer_->try_write_buffered(record.data, record.size)) return;
    py::gil_scoped_release release;
    writer_->write(record.data, record.size);
  }

  std::unique_ptr<RecordWriter> writer_;
  bool python_sink_;
};

int checked_level(Compression compression, int level) {
  if (level < -1 || level > 9) throw std::invalid_argument("compression level must be 0..9");
  if (compression == Compression::kNone && level != -1) {
    throw std::invalid_argument("a compression level needs compression='gzip' or 'zlib'");
  }
  return level;
}

// write() without pybind11's argument dispatch and type lookup, which cost more than copying a
// small record: a plain CPython method (vectorcall, one argument, positional or `record=`).
// Only installed on RecordWriter, whose method descriptor checks that `self` is one.
PyObject* writer_write(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  PyObject* record = nargs + nkw == 1 ? args[0] : nullptr;
  if (record == nullptr ||
      (nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "record") != 0)) {
    PyErr_SetString(PyExc_TypeError, "write() takes exactly one argument, record");
    return nullptr;
  }
  try {
    built_value<PyWriter>(self).write(record);
    Py_RETURN_NONE;
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

PyMethodDef write_method = {
    "write", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(writer_write)),
    METH_FASTCALL | METH_KEYWORDS,
    "write($self, /, record)\n--\n\nWrites one record (any bytes-like object)."};

}  // namespace
}  // namespace tfr::py_bind

TFR_BUILT_ONLY(tfr::py_bind::PyWriter)

namespace tfr::py_bind {

void register_writer(py::module_& m) {
  auto cls =
      py::class_<PyWriter>(m, "RecordWriter",
                           "Writes TFRecord records; see tfrec_fast.TFRecordWriter.")
          .def_static(
              "create_path",
              [](const std::string& path, const std::string& compression, int level,
                 size_t buffer_size) {
                const Compression c = parse_compression(compression);
                const int lvl = checked_level(c, level);
                std::unique_ptr<Sink> sink;
                {
                  py::gil_scoped_release release;
                  sink = maybe_deflate(std::make_unique<FileSink>(path), c, lvl);
                }
                return std::make_unique<PyWriter>(std::move(sink), buffer_size, false);
              },
              py::arg("path"), py::arg("compression"), py::arg("level"), py::arg("buffer_size"))
          .def_static(
              "create_file",
              [](py::object file, const std::string& name, const std::string& compression,
                 int level, size_t buffer_size) {
                const Compression c = parse_compression(compression);
                auto sink = maybe_deflate(std::make_unique<PySink>(std::move(file), name), c,
                                          checked_level(c, level));
                return std::make_unique<PyWriter>(std::move(sink), buffer_size, true);
              },
              py::arg("file"), py::arg("name"), py::arg("compression"), py::arg("level"),
              py::arg("buffer_size"))
          .def("write_batch", &PyWriter::write_batch, py::arg("records"))
          .def("flush", &PyWriter::flush, py::arg("sync") = false)
          .def("close", &PyWriter::close)
          .def_property_readonly("records_written", &PyWriter::records_written);
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  auto write = py::reinterpret_steal<py::object>(PyDescr_NewMethod(type, &write_method));
  if (!write || PyObject_SetAttrString(cls.ptr(), "write", write.ptr()) != 0) {
    throw py::error_already_set();
  }
}

}  // namespace tfr::py_bind
