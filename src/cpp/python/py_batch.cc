// RecordBatch for Python: numpy views of C++ memory and per-record memoryviews, all read-only and
// all keeping the batch alive.
#include <pybind11/stl.h>

#include <cstring>

#include "py_common.h"

namespace tfr::py_bind {
namespace {

const uint8_t kNoBytes = 0;  // a valid address for empty batches

const uint8_t* data_ptr(const RecordBatch& b) { return b.data.data() ? b.data.data() : &kNoBytes; }

// A read-only numpy view of `count` items at `ptr`, owned by `owner`.
template <typename T>
py::array readonly_view(const T* ptr, size_t count, py::handle owner) {
  py::array arr(py::dtype::of<T>(), {py::ssize_t(count)}, {py::ssize_t(sizeof(T))}, ptr, owner);
  // PyArray_CLEARFLAGS: setting arr.flags.writeable through Python costs more than the view.
  py::detail::array_proxy(arr.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return arr;
}

size_t checked_index(const RecordBatch& b, py::ssize_t i) {
  const auto n = py::ssize_t(b.size());
  if (i < 0) i += n;
  if (i < 0 || i >= n) throw std::out_of_range("record index out of range");
  return size_t(i);
}

py::object memoryview_of(py::handle owner) {
  return py::reinterpret_steal<py::object>(PyMemoryView_FromObject(owner.ptr()));
}

// Iterates one batch's records as memoryviews (or bytes).
struct BatchIterator {
  std::shared_ptr<RecordBatch> batch;
  py::object base_view;
  bool copy;
  size_t next = 0;
};

// The next record, or a null object at the end.
py::object next_record(BatchIterator& it) {
  if (it.next >= it.batch->size()) return py::object();
  const size_t i = it.next++;
  return it.copy ? record_bytes(*it.batch, i) : record_view(it.base_view, *it.batch, i);
}

// tp_iternext without pybind11's dispatch, as the reader's: iterating a batch's records costs
// about what iterating the reader does. Only installed on _BatchIterator.
PyObject* batch_iternext(PyObject* self) {
  try {
    return next_record(built_value<BatchIterator>(self)).release().ptr();
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

// len(batch) as a type slot, without pybind11's dispatch: parsing asks for it every batch.
Py_ssize_t batch_length(PyObject* self) {
  try {
    return Py_ssize_t(built_value<RecordBatch>(self).size());
  } catch (...) {
    py::detail::try_translate_exceptions();
    return -1;
  }
}

// Copies byte ranges of `source` back to back into `out` (a writable buffer the caller allocated,
// e.g. from Arrow's memory pool, whose size must be their total).
void gather(std::shared_ptr<RecordBatch> source, const py::array_t<int64_t>& starts_in,
            const py::array_t<int64_t>& ends_in, const py::bytes& fill, const py::buffer& out) {
  // Owned copies, checked once: the copy below runs without the GIL.
  const std::vector<int64_t> starts(starts_in.data(), starts_in.data() + starts_in.size());
  const std::vector<int64_t> ends(ends_in.data(), ends_in.data() + ends_in.size());
  const std::string fallback = fill;
  if (starts.size() != ends.size()) throw std::invalid_argument("starts and ends differ in length");
  const auto limit = int64_t(source->data.size());
  uint64_t total = 0;
  for (size_t j = 0; j < starts.size(); ++j) {
    if (starts[j] < 0) {
      total += fallback.size();
    } else if (ends[j] < starts[j] || ends[j] > limit) {
      throw std::out_of_range("byte range " + std::to_string(j) + " lies outside the batch");
    } else {
      total += uint64_t(ends[j] - starts[j]);
    }
  }
  const py::buffer_info dst = out.request(/*writable=*/true);
  if (dst.ndim != 1 || dst.itemsize != 1 || uint64_t(dst.size) != total) {
    throw std::invalid_argument("out must be a contiguous byte buffer of exactly " +
                                std::to_string(total) + " bytes");
  }
  py::gil_scoped_release release;
  auto* p = static_cast<uint8_t*>(dst.ptr);
  for (size_t j = 0; j < starts.size(); ++j) {
    const bool fill_in = starts[j] < 0;
    const void* from = fill_in ? static_cast<const void*>(fallback.data())
                               : static_cast<const void*>(source->data.data() + starts[j]);
    const size_t n = fill_in ? fallback.size() : size_t(ends[j] - starts[j]);
    if (n) std::memcpy(p, from, n);
    p += n;
  }
}

}  // namespace
}  // namespace tfr::py_bind

TFR_BUILT_ONLY(tfr::py_bind::BatchIterator)

namespace tfr::py_bind {

py::object wrap_batch(std::shared_ptr<RecordBatch> batch) { return py::cast(std::move(batch)); }

py::object record_view(const py::object& base_view, const RecordBatch& batch, size_t i) {
  // What memoryview slicing does, minus the slice object: a new view on the same managed buffer
  // (so it keeps the batch alive and stays read-only), narrowed to the record. A 1-D byte view
  // stays contiguous, so its flags need no update.
  PyObject* view = PyMemoryView_FromObject(base_view.ptr());
  if (view == nullptr) throw py::error_already_set();
  Py_buffer* buffer = PyMemoryView_GET_BUFFER(view);
  const int64_t start = batch.offsets[i];
  const auto length = py::ssize_t(batch.offsets[i + 1] - start);
  buffer->buf = static_cast<uint8_t*>(buffer->buf) + start;
  buffer->len = length;
  buffer->shape[0] = length;
  return py::reinterpret_steal<py::object>(view);
}

py::object record_bytes(const RecordBatch& batch, size_t i) {
  const int64_t start = batch.offsets[i];
  PyObject* bytes =
      PyBytes_FromStringAndSize(reinterpret_cast<const char*>(data_ptr(batch) + start),
                                py::ssize_t(batch.offsets[i + 1] - start));
  if (bytes == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(bytes);
}

void register_batch(py::module_& m) {
  auto batch_class = py::class_<RecordBatch, std::shared_ptr<RecordBatch>>(
      m, "RecordBatch", py::buffer_protocol(), "Records as one byte buffer plus offsets.");
  batch_class
      .def_buffer([](RecordBatch& b) {
        return py::buffer_info(const_cast<uint8_t*>(data_ptr(b)), 1, "B", 1,
                               {py::ssize_t(b.data.size())}, {py::ssize_t(1)}, /*readonly=*/true);
      })
      .def_static(
          "from_records",
          [](const py::iterable& records) {
            auto batch = std::make_shared<RecordBatch>();
            for (py::handle record : records) {
              PyBytesView view(record);
              batch->data.append(view.data(), view.size());
              batch->offsets.push_back(int64_t(batch->data.size()));
              batch->positions.push_back(-1);  // not read from a stream
            }
            return batch;
          },
          py::arg("records"), "A batch holding copies of the given bytes-like records.")
      .def_static(
          "concat",
          [](const std::vector<std::shared_ptr<RecordBatch>>& parts,
             std::shared_ptr<BufferPool> pool) {
            auto out = std::make_shared<RecordBatch>();
            py::gil_scoped_release release;  // batches are never changed once made
            size_t bytes = 0, records = 0;
            for (const auto& part : parts) {
              bytes += part->data.size();
              records += part->size();
            }
            if (pool) {
              out->data = pool->take(bytes);
              out->pool = pool;
            }
            out->data.reserve(bytes);
            out->offsets.reserve(records + 1);
            out->positions.reserve(records);
            for (const auto& part : parts) {
              const int64_t shift = int64_t(out->data.size()) - part->offsets[0];
              out->data.append(part->data.data(), part->data.size());
              for (size_t i = 1; i < part->offsets.size(); ++i) {
                out->offsets.push_back(part->offsets[i] + shift);
              }
              out->positions.insert(out->positions.end(), part->positions.begin(),
                                    part->positions.end());
            }
            return out;
          },
          py::arg("batches"), py::arg("pool") = nullptr,
          "One batch holding the records of the given batches, in order (its buffer from pool).")
      .def_static("gather", &gather, py::arg("source"), py::arg("starts"), py::arg("ends"),
                  py::arg("default"), py::arg("out"),
                  "Copies the byte ranges [starts[j], ends[j]) of source's buffer (a start of -1:\n"
                  "`default`) back to back into `out`, a writable buffer of exactly their total\n"
                  "size, with the GIL released: a BytesColumn's values made contiguous (Arrow's\n"
                  "LargeBinary layout) in memory the caller chose.")
      .def("__len__", &RecordBatch::size)
      .def("__getitem__",
           [](py::object self, py::ssize_t i) {
             const auto& b = self.cast<const RecordBatch&>();
             return record_view(memoryview_of(self), b, checked_index(b, i));
           })
      .def(
          "__iter__",
          [](py::object self, bool copy) {
            return BatchIterator{self.cast<std::shared_ptr<RecordBatch>>(), memoryview_of(self),
                                 copy};
          },
          py::arg("copy") = false)
      .def_property_readonly("data",
                             [](py::object self) {
                               const auto& b = self.cast<const RecordBatch&>();
                               return readonly_view(data_ptr(b), b.data.size(), self);
                             })
      .def_property_readonly("offsets",
                             [](py::object self) {
                               const auto& b = self.cast<const RecordBatch&>();
                               return readonly_view(b.offsets.data(), b.offsets.size(), self);
                             })
      .def_property_readonly("positions",
                             [](py::object self) {
                               const auto& b = self.cast<const RecordBatch&>();
                               return readonly_view(b.positions.data(), b.positions.size(), self);
                             })
      .def_property_readonly("nbytes", [](const RecordBatch& b) { return b.data.size(); })
      .def("to_list",
           [](const RecordBatch& b) {
             py::list out(b.size());
             for (size_t i = 0; i < b.size(); ++i) out[i] = record_bytes(b, i);
             return out;
           })
      .def(
          "to_arrow",
          [](py::object self, bool large_types) {  // the mapping lives in tfrec_fast.arrow
            return py::module_::import("tfrec_fast.arrow")
                .attr("batch_to_arrow")(self, py::arg("large_types") = large_types);
          },
          py::arg("large_types") = true,
          "The records as a pyarrow.LargeBinaryArray sharing this batch's memory (pyarrow needed).")
      .def("__repr__", [](const RecordBatch& b) {
        return "<RecordBatch " + std::to_string(b.size()) + " records, " +
               std::to_string(b.data.size()) + " bytes>";
      });

  auto* batch_type = reinterpret_cast<PyHeapTypeObject*>(batch_class.ptr());
  batch_type->as_sequence.sq_length = batch_length;
  batch_type->as_mapping.mp_length = batch_length;
  PyType_Modified(&batch_type->ht_type);

  auto iterator = py::class_<BatchIterator>(m, "_BatchIterator")
                      .def("__iter__", [](py::object self) { return self; })
                      .def("__next__", [](BatchIterator& it) {
                        py::object record = next_record(it);
                        if (!record) throw py::stop_iteration();
                        return record;
                      });
  auto* type = reinterpret_cast<PyTypeObject*>(iterator.ptr());
  type->tp_iternext = batch_iternext;
  PyType_Modified(type);
}

}  // namespace tfr::py_bind
