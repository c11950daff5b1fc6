// The record reader for Python: sources (path, memory, file-like), batches with the GIL released,
// and per-record iteration that makes one Python object per record and nothing else.
#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>

#include "errors.h"
#include "py_common.h"

namespace tfr::py_bind {
namespace {

// A Python binary file-like object (readinto() preferred, read() otherwise). Called with the GIL
// released by the reader, so it takes the GIL for each call.
class PyFileSource final : public Source {
 public:
  PyFileSource(py::object file, std::string name)
      : Source(std::move(name)), file_(std::move(file)) {
    has_readinto_ = py::hasattr(file_, "readinto");
    measure();
  }
  ~PyFileSource() override {
    py::gil_scoped_acquire gil;
    file_ = py::object();
  }
  PyFileSource(const PyFileSource&) = delete;
  PyFileSource& operator=(const PyFileSource&) = delete;

  size_t read(uint8_t* dst, size_t n) override {
    py::gil_scoped_acquire gil;
    return call_python([&] { return read_locked(dst, n); });
  }

  size_t read_locked(uint8_t* dst, size_t n) {
    n = std::min<size_t>(n, size_t(1) << 30);
    if (has_readinto_) {
      auto view = py::reinterpret_steal<py::object>(
          PyMemoryView_FromMemory(reinterpret_cast<char*>(dst), py::ssize_t(n), PyBUF_WRITE));
      py::object got;
      try {
        got = file_.attr("readinto")(view);
      } catch (...) {
        PyObject_CallMethod(view.ptr(), "release", nullptr);  // even when readinto raised
        PyErr_Clear();
        throw;
      }
      view.attr("release")();  // the file object must not keep our buffer
      const size_t count = checked_count(got, n);
      consumed_ += count;
      return count;
    }
    py::object chunk = file_.attr("read")(n);
    PyBytesView bytes(chunk);
    checked_count(py::int_(bytes.size()), n);
    std::memcpy(dst, bytes.data(), bytes.size());
    consumed_ += bytes.size();
    return bytes.size();
  }

  std::optional<uint64_t> remaining() override {
    if (!size_) return std::nullopt;
    return *size_ > consumed_ ? *size_ - consumed_ : 0;
  }
  std::optional<uint64_t> total_size() override { return size_; }

 private:
  // A seekable file-like tells its size once, so lengths are bounded as for paths.
  void measure() {
    if (!py::hasattr(file_, "seekable") || !py::hasattr(file_, "tell")) return;
    try {
      if (!file_.attr("seekable")().cast<bool>()) return;
      const auto start = file_.attr("tell")().cast<uint64_t>();
      const auto end = file_.attr("seek")(0, 2).cast<uint64_t>();
      file_.attr("seek")(start);
      if (end >= start) size_ = end - start;
    } catch (const py::error_already_set&) {
      // Not really seekable after all: read it as a stream of unknown size.
    }
  }

  size_t checked_count(const py::object& got, size_t asked) const {
    if (got.is_none()) {
      throw IoError(EAGAIN, "file-like object '" + name() + "' has no data ready (non-blocking)");
    }
    const auto count = got.cast<py::ssize_t>();
    if (count < 0 || size_t(count) > asked) {
      throw IoError(EIO, "file-like object '" + name() + "' reported " + std::to_string(count) +
                             " bytes for a read of " + std::to_string(asked));
    }
    return size_t(count);
  }

  py::object file_;
  bool has_readinto_ = false;
  std::optional<uint64_t> size_;  // bytes from the starting position to the end, when seekable
  uint64_t consumed_ = 0;
};

// Copies records [from, to) of a batch into a batch of their own.
std::shared_ptr<RecordBatch> slice_batch(const RecordBatch& b, size_t from, size_t to) {
  auto out = std::make_shared<RecordBatch>();
  const int64_t base = b.offsets[from];
  out->data.append(b.data.data() + base, size_t(b.offsets[to] - base));
  for (size_t i = from; i < to; ++i) {
    out->offsets.push_back(b.offsets[i + 1] - base);
    out->positions.push_back(b.positions[i]);
  }
  return out;
}

class PyReader {
 public:
  struct Options {
    ReaderOptions reader;
    bool copy = false;
    size_t batch_records = 0;
    size_t batch_bytes = 0;
  };

  PyReader(std::unique_ptr<Source> source, std::unique_ptr<PyBytesView> memory, Options options)
      : memory_(std::move(memory)),
        reader_(std::make_shared<RecordReader>(std::move(source), options.reader)),
        name_(reader_->name()),
        options_(options) {}

  // The next record, or a null object at the end (tp_iternext's convention: no StopIteration).
  py::object next() {
    drop_spent();
    if (pending_.empty()) {
      auto serial = lock_serial();
      drop_spent();  // another thread may have fetched while this one waited
      if (pending_.empty()) {
        auto batch = fetch(options_.batch_records, options_.batch_bytes);
        if (batch->size() == 0) return py::object();
        py::object owner = wrap_batch(batch);
        auto view = py::reinterpret_steal<py::object>(PyMemoryView_FromObject(owner.ptr()));
        pending_.push_back(Cursor{std::move(batch), std::move(view), 0});
      }
    }
    Cursor& c = pending_.front();
    const size_t i = c.next++;
    return options_.copy ? record_bytes(*c.batch, i) : record_view(c.view, *c.batch, i);
  }

  py::object read_batch(size_t max_records, size_t max_bytes) {
    // Records already read for iteration come first, so mixing the two loses nothing.
    if (auto part = take_pending(max_records)) return wrap_batch(std::move(part));
    auto serial = lock_serial();
    if (auto part = take_pending(max_records)) return wrap_batch(std::move(part));
    return wrap_batch(fetch(max_records, max_bytes));
  }

  uint64_t count() {
    auto reader = live();
    uint64_t n = buffered_records();
    pending_.clear();
    py::gil_scoped_release release;
    return n + reader->count();
  }

  uint64_t tell() {
    for (const Cursor& c : pending_) {
      if (c.next < c.batch->size()) return uint64_t(c.batch->positions[c.next]);
    }
    return unlocked(&RecordReader::tell);
  }

  uint64_t records_read() { return unlocked(&RecordReader::records_read) - buffered_records(); }

  void close() {
    pending_.clear();
    reader_.reset();  // a read in flight in another thread keeps its own reference
  }

  py::list skipped() {
    py::list out;
    for (const DataLoss& loss : unlocked(&RecordReader::take_skipped)) {
      out.append(data_loss_error(loss));
    }
    return out;
  }

  void set_pool(std::shared_ptr<BufferPool> pool) { live()->set_pool(std::move(pool)); }

  bool closed() const { return reader_ == nullptr; }
  const std::string& name() const { return name_; }

 private:
  struct Cursor {
    std::shared_ptr<RecordBatch> batch;
    py::object view;  // memoryview of the batch: per-record views are slices of it
    size_t next;
  };

  void drop_spent() {
    while (!pending_.empty() && pending_.front().next >= pending_.front().batch->size()) {
      pending_.pop_front();
    }
  }

  // Up to max_records of the records read for iteration and not handed out yet; null if none.
  std::shared_ptr<RecordBatch> take_pending(size_t max_records) {
    drop_spent();
    if (pending_.empty()) return nullptr;
    Cursor& c = pending_.front();
    const size_t to = std::min(c.batch->size(), c.next + std::max<size_t>(max_records, 1));
    auto part = slice_batch(*c.batch, c.next, to);
    c.next = to;
    return part;
  }

  // Held by next() and read_batch() from finding pending_ empty until the batch they fetch is
  // queued or handed out, so one fetch is in flight at a time and threads sharing the reader get
  // records in file order (else a fetch that finished later could queue an older batch behind a
  // newer one, or a newer batch go out while an older one is in flight). Only fetches take it:
  // records already in pending_ go out under the GIL alone. Awaited with the GIL released, since
  // its holder needs the GIL back to finish.
  std::unique_lock<std::mutex> lock_serial() {
    std::unique_lock<std::mutex> lock(serial_, std::try_to_lock);
    if (!lock.owns_lock()) {
      py::gil_scoped_release release;
      lock.lock();
    }
    return lock;
  }

  std::shared_ptr<RecordReader> live() {
    if (!reader_) throw std::logic_error("I/O operation on a closed TFRecordReader");
    return reader_;
  }

  // Calls a RecordReader method with the GIL released: the reader's mutex may be held by a
  // thread whose Python file-like source is waiting for the GIL.
  template <typename R>
  R unlocked(R (RecordReader::*method)()) {
    auto reader = live();
    py::gil_scoped_release release;
    return ((*reader).*method)();
  }

  std::shared_ptr<RecordBatch> fetch(size_t max_records, size_t max_bytes) {
    auto reader = live();
    py::gil_scoped_release release;
    return std::shared_ptr<RecordBatch>(reader->read_batch(max_records, max_bytes));
  }

  uint64_t buffered_records() const {
    uint64_t n = 0;
    for (const Cursor& c : pending_) n += c.batch->size() - c.next;
    return n;
  }

  // Declared first so it is released last: the memory a MemorySource reads from.
  std::unique_ptr<PyBytesView> memory_;
  std::shared_ptr<RecordReader> reader_;
  std::string name_;
  Options options_;
  // Batches read for iteration and not yet handed out (with serial_, at most one not spent).
  std::deque<Cursor> pending_;
  std::mutex serial_;
};

PyReader::Options make_options(const std::string& compression, bool verify, bool copy,
                               size_t buffer_size, size_t batch_records, size_t batch_bytes,
                               bool skip_corrupt) {
  parse_compression(compression);  // reject unknown names early
  PyReader::Options o;
  o.reader.verify = verify;
  o.reader.skip_corrupt = skip_corrupt;
  o.reader.hint_compression = parse_compression(compression) == Compression::kNone;
  o.reader.buffer_size = buffer_size;
  o.copy = copy;
  o.batch_records = std::max<size_t>(batch_records, 1);
  o.batch_bytes = std::max<size_t>(batch_bytes, 1);
  return o;
}

// tp_iternext without pybind11's argument dispatch or type lookup, which would cost more than the
// record itself. Only installed on RecordReader, so `self` always holds a PyReader.
// Like built_value and the casters of py_common.h it uses pybind11's detail:: API (the instance
// layout and the exception translators, unchanged since 2.2); pyproject.toml bounds pybind11
// below the next major version for it.
PyObject* reader_iternext(PyObject* self) {
  try {
    return built_value<PyReader>(self).next().release().ptr();
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

}  // namespace
}  // namespace tfr::py_bind

TFR_BUILT_ONLY(tfr::py_bind::PyReader)

namespace tfr::py_bind {

// The options every open_* takes, by keyword only (reader.py names each one).
#define OPEN_OPTIONS                                                                             \
  py::kw_only(), py::arg("compression") = "", py::arg("verify") = true, py::arg("copy") = false, \
                 py::arg("buffer_size"), py::arg("batch_records"), py::arg("batch_bytes"),       \
                 py::arg("skip_corrupt") = false

void register_reader(py::module_& m) {
  py::class_<BufferPool, std::shared_ptr<BufferPool>>(
      m, "BufferPool",
      "Byte buffers of dead batches, kept for the next batches of the readers sharing it.")
      .def(py::init<size_t, size_t, size_t>(), py::arg("max_buffers"),
           py::arg("max_bytes") = SIZE_MAX, py::arg("hot_bytes") = SIZE_MAX)
      .def_property_readonly("max_buffers", &BufferPool::max_buffers)
      .def_property_readonly("max_bytes", &BufferPool::max_bytes)
      .def_property_readonly("hot_bytes", &BufferPool::hot_bytes)
      .def_property_readonly("kept_bytes", &BufferPool::kept_bytes);
  auto cls =
      py::class_<PyReader>(m, "RecordReader",
                           "Reads TFRecord records; see tfrec_fast.TFRecordReader.")
          .def_static(
              "open_path",
              [](const std::string& path, const std::string& compression, bool verify, bool copy,
                 size_t buffer_size, size_t batch_records, size_t batch_bytes, bool skip_corrupt) {
                auto options = make_options(compression, verify, copy, buffer_size, batch_records,
                                            batch_bytes, skip_corrupt);
                std::unique_ptr<Source> source;
                {
                  py::gil_scoped_release release;
                  source = maybe_inflate(std::make_unique<FileSource>(path),
                                         parse_compression(compression));
                }
                return std::make_unique<PyReader>(std::move(source), nullptr, options);
              },
              py::arg("path"), OPEN_OPTIONS)
          .def_static(
              "open_memory",
              [](py::handle data, const std::string& name, const std::string& compression,
                 bool verify, bool copy, size_t buffer_size, size_t batch_records,
                 size_t batch_bytes, bool skip_corrupt) {
                auto options = make_options(compression, verify, copy, buffer_size, batch_records,
                                            batch_bytes, skip_corrupt);
                auto memory = std::make_unique<PyBytesView>(data);
                auto source = maybe_inflate(
                    std::make_unique<MemorySource>(memory->data(), memory->size(), name),
                    parse_compression(compression));
                return std::make_unique<PyReader>(std::move(source), std::move(memory), options);
              },
              py::arg("data"), py::arg("name"), OPEN_OPTIONS)
          .def_static(
              "open_file",
              [](py::object file, const std::string& name, const std::string& compression,
                 bool verify, bool copy, size_t buffer_size, size_t batch_records,
                 size_t batch_bytes, bool skip_corrupt) {
                auto options = make_options(compression, verify, copy, buffer_size, batch_records,
                                            batch_bytes, skip_corrupt);
                auto source = maybe_inflate(std::make_unique<PyFileSource>(std::move(file), name),
                                            parse_compression(compression));
                return std::make_unique<PyReader>(std::move(source), nullptr, options);
              },
              py::arg("file"), py::arg("name"), OPEN_OPTIONS)
#undef OPEN_OPTIONS
          .def("__iter__", [](py::object self) { return self; })
          .def("__next__",
               [](PyReader& r) {
                 py::object record = r.next();
                 if (!record) throw py::stop_iteration();
                 return record;
               })
          .def("read_batch", &PyReader::read_batch, py::arg("max_records"), py::arg("max_bytes"))
          .def("count", &PyReader::count)
          .def("tell", &PyReader::tell)
          .def_property_readonly("records_read", &PyReader::records_read)
          .def("close", &PyReader::close)
          .def("set_pool", &PyReader::set_pool, py::arg("pool"),
               "Batches take their buffers from (and give them back to) this BufferPool.")
          .def("skipped", &PyReader::skipped,
               "DataLossErrors for the damage skipped since the last call (skip_corrupt=True).")
          .def_property_readonly("closed", &PyReader::closed)
          .def_property_readonly("name", &PyReader::name);
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  type->tp_iternext = reader_iternext;
  PyType_Modified(type);
}

}  // namespace tfr::py_bind
