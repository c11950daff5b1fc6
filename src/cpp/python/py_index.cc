// Index files and random access for Python: scans and parsing with the GIL released, index arrays
// handed over as numpy arrays that own their memory, batched positional reads.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "errors.h"
#include "py_common.h"
#include "random_access.h"

namespace tfr::py_bind {
namespace {

using Int64Array = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

// A numpy array owning the vector's memory (no copy).
py::array to_numpy(std::vector<int64_t>&& values) {
  auto* owned = new std::vector<int64_t>(std::move(values));
  py::capsule owner(owned, [](void* p) { delete static_cast<std::vector<int64_t>*>(p); });
  return py::array_t<int64_t>({py::ssize_t(owned->size())}, {py::ssize_t(sizeof(int64_t))},
                              owned->data(), owner);
}

std::vector<int64_t> to_vector(const Int64Array& a, const char* what) {
  if (a.ndim() != 1) throw std::invalid_argument(std::string(what) + " must be one-dimensional");
  return std::vector<int64_t>(a.data(), a.data() + a.size());
}

py::tuple index_pair(std::vector<int64_t>&& offsets, std::vector<int64_t>&& sizes) {
  return py::make_tuple(to_numpy(std::move(offsets)), to_numpy(std::move(sizes)));
}

// The Python face of RandomAccessReader: close() drops this handle's reference, while a read in
// flight in another thread keeps its own.
class PyIndexedReader {
 public:
  PyIndexedReader(const std::string& path, std::vector<int64_t> offsets, std::vector<int64_t> sizes,
                  RandomAccessOptions options) {
    py::gil_scoped_release release;
    reader_ =
        std::make_shared<RandomAccessReader>(path, std::move(offsets), std::move(sizes), options);
    size_ = reader_->size();
    path_ = path;
  }

  py::object read(const Int64Array& indices) {
    auto reader = live();
    // Copied while the GIL is held: another thread may change the caller's array meanwhile.
    const std::vector<int64_t> idx = to_vector(indices, "indices");
    for (const int64_t i : idx) {  // here, so that it is an IndexError, not a ValueError
      if (i < 0 || uint64_t(i) >= size_) {
        throw std::out_of_range("record index " + std::to_string(i) + " out of range for " + path_ +
                                " (" + std::to_string(size_) + " records)");
      }
    }
    std::shared_ptr<RecordBatch> batch;
    {
      py::gil_scoped_release release;
      batch = reader->read(idx.data(), idx.size());
    }
    return wrap_batch(std::move(batch));
  }

  // One record as bytes, read straight into the bytes object: no batch, no index array.
  py::bytes read_one(int64_t index) {
    auto reader = live();
    if (index < 0 || uint64_t(index) >= size_) {
      throw std::out_of_range("record index " + std::to_string(index) + " out of range for " +
                              path_ + " (" + std::to_string(size_) + " records)");
    }
    const size_t n = reader->payload_size(size_t(index));
    auto out = py::reinterpret_steal<py::bytes>(PyBytes_FromStringAndSize(nullptr, py::ssize_t(n)));
    if (!out) throw py::error_already_set();
    // Nobody else sees the bytes object yet, so it may be filled without the GIL.
    auto* data = reinterpret_cast<uint8_t*>(PyBytes_AS_STRING(out.ptr()));
    {
      py::gil_scoped_release release;
      reader->read_one(size_t(index), data);
    }
    return out;
  }

  void close() { reader_.reset(); }
  bool closed() const { return reader_ == nullptr; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::shared_ptr<RandomAccessReader> live() {
    if (!reader_) throw std::logic_error("I/O operation on a closed IndexedTFRecordReader");
    return reader_;
  }

  std::shared_ptr<RandomAccessReader> reader_;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace
}  // namespace tfr::py_bind

TFR_BUILT_ONLY(tfr::py_bind::PyIndexedReader)

namespace tfr::py_bind {

void register_index(py::module_& m) {
  m.def(
      "scan_index",
      [](const std::string& path) {
        std::vector<int64_t> offsets, sizes;
        {
          py::gil_scoped_release release;
          scan_index(path, &offsets, &sizes);
        }
        return index_pair(std::move(offsets), std::move(sizes));
      },
      py::arg("path"),
      "(offsets, sizes) of every record of an uncompressed file, reading only record headers.");
  m.def(
      "format_index",
      [](const Int64Array& offsets, const Int64Array& sizes) {
        if (offsets.ndim() != 1 || sizes.ndim() != 1 || offsets.size() != sizes.size()) {
          throw std::invalid_argument(
              "offsets and sizes must be one-dimensional and of equal length");
        }
        std::string text;
        {
          py::gil_scoped_release release;
          text = format_index(offsets.data(), sizes.data(), size_t(offsets.size()));
        }
        return py::bytes(text);
      },
      py::arg("offsets"), py::arg("sizes"), "The index text: one line \"offset size\" per record.");
  m.def(
      "parse_index",
      [](py::handle data, const std::string& name) {
        PyBytesView view(data);
        std::vector<int64_t> offsets, sizes;
        {
          py::gil_scoped_release release;
          parse_index(reinterpret_cast<const char*>(view.data()), view.size(), name, &offsets,
                      &sizes);
        }
        return index_pair(std::move(offsets), std::move(sizes));
      },
      py::arg("data"), py::arg("name"), "(offsets, sizes) from the text of an index file.");

  m.def(
      "check_fetched",
      [](const py::bytes& data, const std::string& name, const Int64Array& starts,
         const Int64Array& indices, const Int64Array& offsets, const Int64Array& sizes,
         bool verify) {
        const size_t n = size_t(starts.size());
        if (starts.ndim() != 1 || indices.ndim() != 1 || offsets.ndim() != 1 || sizes.ndim() != 1 ||
            size_t(indices.size()) != n || size_t(offsets.size()) != n ||
            size_t(sizes.size()) != n) {
          throw std::invalid_argument(
              "starts, indices, offsets and sizes must be one-dimensional "
              "and of equal length");
        }
        // Copied while the GIL is held; `data` is an immutable bytes object we hold.
        std::vector<FetchedRecord> records(n);
        for (size_t k = 0; k < n; ++k) {
          if (indices.data()[k] < 0) throw std::invalid_argument("negative record index");
          records[k] = FetchedRecord{starts.data()[k], size_t(indices.data()[k]), offsets.data()[k],
                                     sizes.data()[k]};
        }
        PyBytesView view(data);
        std::shared_ptr<RecordBatch> batch;
        {
          py::gil_scoped_release release;
          batch = check_fetched(name, view.data(), view.size(), records.data(), n, verify);
        }
        return wrap_batch(std::move(batch));
      },
      py::arg("data"), py::arg("name"), py::arg("starts"), py::arg("indices"), py::arg("offsets"),
      py::arg("sizes"), py::arg("verify"),
      "Checks records fetched by range requests (framed record k at data[starts[k]:]) as "
      "IndexedReader.read does; returns their payloads as one batch, positions = offsets.");

  py::class_<PyIndexedReader>(m, "IndexedReader",
                              "Random access by index; see tfrec_fast.IndexedTFRecordReader.")
      .def(py::init([](const std::string& path, const Int64Array& offsets, const Int64Array& sizes,
                       bool verify, uint64_t max_gap, uint64_t max_read,
                       std::shared_ptr<BufferPool> pool) {
             RandomAccessOptions options;
             options.verify = verify;
             options.max_gap = max_gap;
             options.max_read = max_read;
             options.pool = std::move(pool);
             return std::make_unique<PyIndexedReader>(path, to_vector(offsets, "offsets"),
                                                      to_vector(sizes, "sizes"), options);
           }),
           py::arg("path"), py::arg("offsets"), py::arg("sizes"), py::arg("verify") = true,
           py::arg("max_gap") = RandomAccessOptions().max_gap,
           py::arg("max_read") = RandomAccessOptions().max_read, py::arg("pool") = nullptr)
      .def("read", &PyIndexedReader::read, py::arg("indices"))
      .def("read_one", &PyIndexedReader::read_one, py::arg("index"))
      .def("__len__", &PyIndexedReader::size)
      .def("close", &PyIndexedReader::close)
      .def_property_readonly("closed", &PyIndexedReader::closed)
      .def_property_readonly("path", &PyIndexedReader::path);
}

}  // namespace tfr::py_bind
