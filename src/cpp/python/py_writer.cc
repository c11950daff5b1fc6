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
    PyBytesView view(record);
    // A copy into the buffer keeps the GIL (cheaper than releasing it); anything that could
    // wait (I/O, or another thread's flush holding the writer) runs without it.
    if (!python_sink_ && writer_->try_write_buffered(view.data(), view.size())) return;
    py::gil_scoped_release release;
    writer_->write(view.data(), view.size());
  }

  void write_batch(py::handle records) {
    if (py::isinstance<RecordBatch>(records)) {
      const auto& batch = records.cast<const RecordBatch&>();
      py::gil_scoped_release release;
      writer_->write_batch(batch.data.data(), batch.offsets.data(), batch.size());
      return;
    }
    // Any iterable of bytes-like objects, taken in chunks so a long generator is never held
    // whole. Each view holds immutable bytes where they are and copies anything else (a
    // bytearray a generator refills, say) when it is taken, so each record keeps its contents.
    constexpr size_t kChunk = 4096;
    std::vector<std::unique_ptr<PyBytesView>> views;
    auto write_chunk = [&] {
      {
        py::gil_scoped_release release;
        for (const auto& view : views) writer_->write(view->data(), view->size());
      }
      views.clear();
    };
    for (py::handle record : py::iter(records)) {
      views.push_back(std::make_unique<PyBytesView>(record));
      if (views.size() == kChunk) write_chunk();
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

}  // namespace

void register_writer(py::module_& m) {
  py::class_<PyWriter>(m, "RecordWriter", "Writes TFRecord records; see tfrec_fast.TFRecordWriter.")
      .def_static(
          "create_path",
          [](const std::string& path, const std::string& compression, int level, size_t buffer_size) {
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
          [](py::object file, const std::string& name, const std::string& compression, int level,
             size_t buffer_size) {
            const Compression c = parse_compression(compression);
            auto sink = maybe_deflate(std::make_unique<PySink>(std::move(file), name), c,
                                      checked_level(c, level));
            return std::make_unique<PyWriter>(std::move(sink), buffer_size, true);
          },
          py::arg("file"), py::arg("name"), py::arg("compression"), py::arg("level"),
          py::arg("buffer_size"))
      .def("write", &PyWriter::write, py::arg("record"))
      .def("write_batch", &PyWriter::write_batch, py::arg("records"))
      .def("flush", &PyWriter::flush, py::arg("sync") = false)
      .def("close", &PyWriter::close)
      .def_property_readonly("records_written", &PyWriter::records_written);
}

}  // namespace tfr::py_bind
