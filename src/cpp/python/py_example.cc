// tf.train.Example decoding for Python: specs in, numpy columns out, GIL released in between.
#include <algorithm>
#include <memory>

#include "example_decoder.h"
#include "py_common.h"
#include "task_pool.h"

namespace tfr::py_bind {

// The specs of one kind of decode, checked and copied once (tfrec_fast keeps one in each plan),
// so that a call neither looks at nor copies each FieldSpec. Immutable: a call reads it with the
// GIL released.
struct FieldSpecs {
  std::vector<FieldSpec> specs;
};

}  // namespace tfr::py_bind

TFR_BUILT_ONLY(tfr::py_bind::FieldSpecs)

namespace tfr::py_bind {
namespace {

// The FieldSpecs of a list (or any iterable) of FieldSpec objects, copied.
FieldSpecs field_specs(const py::iterable& items) {
  FieldSpecs out;
  for (py::handle s : items) {
    if (!py::isinstance<FieldSpec>(s)) {
      throw py::type_error(std::string("specs are FieldSpec objects, not ") +
                           Py_TYPE(s.ptr())->tp_name);
    }
    out.specs.push_back(s.cast<const FieldSpec&>());
  }
  return out;
}

// Frees a buffer handed to numpy, when the capsule (its array's base, held by nothing else) dies.
template <typename Buffer>
void free_adopted(PyObject* capsule) {
  delete static_cast<Buffer*>(PyCapsule_GetPointer(capsule, nullptr));
}

// Hands a buffer to numpy without copying: the array owns it through a capsule. numpy's C API
// directly: pybind11's py::array and py::capsule cost several times more, on every column of
// every call.
template <typename T, typename Buffer>
py::object adopt(Buffer&& buffer) {
  static const T kEmpty{};
  const size_t count = buffer.size() * sizeof(*buffer.data()) / sizeof(T);
  auto owned = std::make_unique<Buffer>(std::move(buffer));
  const T* ptr = count ? reinterpret_cast<const T*>(owned->data()) : &kEmpty;
  auto& api = py::detail::npy_api::get();
  PyObject* descr = api.PyArray_DescrFromType_(py::detail::npy_format_descriptor<T>::value);
  if (descr == nullptr) throw py::error_already_set();
  Py_intptr_t shape[1] = {Py_intptr_t(count)}, strides[1] = {Py_intptr_t(sizeof(T))};
  py::object array = py::reinterpret_steal<py::object>(api.PyArray_NewFromDescr_(  // takes descr
      api.PyArray_Type_, descr, 1, shape, strides, const_cast<T*>(ptr),
      py::detail::npy_api::NPY_ARRAY_WRITEABLE_, nullptr));
  if (!array) throw py::error_already_set();
  PyObject* capsule = PyCapsule_New(owned.get(), nullptr, &free_adopted<Buffer>);
  if (capsule == nullptr) throw py::error_already_set();
  owned.release();  // the capsule's now, even if the next call fails (it takes the capsule)
  if (api.PyArray_SetBaseObject_(array.ptr(), capsule) != 0) throw py::error_already_set();
  return array;
}

FieldSpec make_spec(std::string name, Kind kind, Layout layout, size_t count,
                    const py::object& default_value, bool sequence, bool required) {
  FieldSpec s;
  s.name = std::move(name);
  s.kind = kind;
  s.layout = layout;
  s.count = count;
  if (!default_value.is_none()) {
    s.has_default = true;
    PyBytesView view(default_value);
    s.default_value.assign(view.data(), view.data() + view.size());
  }
  s.sequence = sequence;
  s.required = required;
  return s;
}

// A column's values as an array of T. Those the decoder may take from `pool` go back to it when
// the array dies, if large; others are freed.
template <typename T>
py::object adopt_values(ByteBuffer&& values, const FieldSpec& s,
                        const std::shared_ptr<BufferPool>& pool) {
  if (pool && pooled_values(s) && values.capacity() >= kPooledColumnBytes) {
    return adopt<T>(PooledBuffer(std::move(values), pool));
  }
  return adopt<T>(std::move(values));
}

// The raw arrays of one decoded column: those its layout has, None for the others.
py::tuple column_arrays(Column& c, const FieldSpec& s, bool presence,
                        const std::shared_ptr<BufferPool>& pool) {
  py::object values = py::none(), starts = py::none(), ends = py::none(), row_splits = py::none(),
             step_splits = py::none(), present = py::none();
  if (s.layout == Layout::kRawBytes) {
    values = adopt_values<uint8_t>(std::move(c.values), s, pool);
  } else if (s.kind == Kind::kBytes) {
    starts = adopt<int64_t>(std::move(c.starts));
    ends = adopt<int64_t>(std::move(c.ends));
  } else if (s.kind == Kind::kInt64) {
    values = adopt_values<int64_t>(std::move(c.values), s, pool);
  } else {
    values = adopt_values<float>(std::move(c.values), s, pool);
  }
  if (s.layout == Layout::kVar || s.sequence) row_splits = adopt<int64_t>(std::move(c.row_splits));
  if (s.layout == Layout::kVar && s.sequence)
    step_splits = adopt<int64_t>(std::move(c.step_splits));
  if (s.layout == Layout::kVar && !s.sequence && presence)
    present = adopt<uint8_t>(std::move(c.present));
  return py::make_tuple(values, starts, ends, row_splits, step_splits, present);
}

// The cores this process may run on (its affinity where the OS has one), asked once per process.
size_t g_usable_cores = 0;

size_t usable_cores() {
  if (g_usable_cores == 0) {
    py::module_ os = py::module_::import("os");
    size_t cores = 0;
    if (py::hasattr(os, "sched_getaffinity")) {
      cores = py::len(os.attr("sched_getaffinity")(0));
    } else {
      py::object count = os.attr("cpu_count")();
      cores = count.is_none() ? 1 : count.cast<size_t>();
    }
    g_usable_cores = std::max<size_t>(1, cores);
  }
  return g_usable_cores;
}

void forget_usable_cores() { g_usable_cores = 0; }

// Runs a decoder call, naming the records' source in any ParseError (bindings.cc translates it).
template <typename Call>
auto naming_source(const std::string& name, Call&& call) {
  try {
    return call();
  } catch (ParseError& e) {
    e.source = name;
    throw;
  }
}

}  // namespace

void register_kinds(py::module_& m) {
  py::enum_<Kind>(m, "Kind", "The kind of a Feature's values (the Feature oneof's field numbers).")
      .value("BYTES", Kind::kBytes, "bytes_list")
      .value("FLOAT", Kind::kFloat, "float_list (float32)")
      .value("INT64", Kind::kInt64, "int64_list")
      .value("FEATURE", Kind::kFeature, "encoder input: each row one serialized Feature message");
  py::enum_<Layout>(m, "Layout", "How a requested feature lands in its decoded column.")
      .value("FIXED", Layout::kFixed, "exactly `count` values per record")
      .value("VAR", Layout::kVar, "any number of values per record, plus row_splits")
      .value("RAW_BYTES", Layout::kRawBytes, "one bytes value of exactly `count` bytes per record");
}

void register_example(py::module_& m) {
  py::class_<FieldSpec>(m, "FieldSpec", "One feature for decode_examples to read.")
      .def(py::init(&make_spec), py::arg("name"), py::arg("kind"), py::arg("layout"), py::kw_only(),
           py::arg("count") = 0, py::arg("default") = py::none(), py::arg("sequence") = false,
           py::arg("required") = false)
      .def_readonly("name", &FieldSpec::name)
      .def_readonly("kind", &FieldSpec::kind)
      .def_readonly("layout", &FieldSpec::layout)
      .def_readonly("count", &FieldSpec::count)
      .def_property_readonly("default",
                             [](const FieldSpec& s) -> py::object {
                               if (!s.has_default) return py::none();
                               return py::bytes(
                                   reinterpret_cast<const char*>(s.default_value.data()),
                                   s.default_value.size());
                             })
      .def_readonly("sequence", &FieldSpec::sequence)
      .def_readonly("required", &FieldSpec::required)
      .def("__repr__", [](const FieldSpec& s) {
        return "FieldSpec(" + py::repr(py::str(s.name)).cast<std::string>() + ", " +
               py::repr(py::cast(s.kind)).cast<std::string>() + ", " +
               py::repr(py::cast(s.layout)).cast<std::string>() +
               ", count=" + std::to_string(s.count) + (s.has_default ? ", default=..." : "") +
               (s.sequence ? ", sequence=True" : "") + (s.required ? ", required=True" : "") + ")";
      });
  py::class_<FieldSpecs>(
      m, "FieldSpecs", "FieldSpec objects checked and copied once, for many decode_examples calls.")
      .def(py::init(&field_specs), py::arg("specs"))
      .def("__len__", [](const FieldSpecs& f) { return f.specs.size(); })
      .def("__getitem__",
           [](const FieldSpecs& f, py::ssize_t i) {
             const auto n = py::ssize_t(f.specs.size());
             if (i < 0) i += n;
             if (i < 0 || i >= n) throw py::index_error("FieldSpecs index out of range");
             return f.specs[size_t(i)];
           })
      .def_property_readonly(
          "records_for_pool",
          [](const FieldSpecs& f) { return records_for_pooled_column(f.specs); },
          "The fewest records for which decode_examples takes a column's buffer from its pool\n"
          "(2**64 - 1: never): with fewer, passing the pool does nothing.")
      .def("__repr__", [](const FieldSpecs& f) {
        return "FieldSpecs(" + std::to_string(f.specs.size()) + " specs)";
      });
  m.def(
      "feature_kinds",
      [](const py::object& batch_obj, const std::string& name, bool sequence_examples,
         bool strict) {
        const auto& batch = batch_obj.cast<const RecordBatch&>();
        std::vector<FeatureKind> kinds = naming_source(name, [&] {
          py::gil_scoped_release release;
          return feature_kinds(batch.data.data(), batch.offsets.data(), batch.size(),
                               sequence_examples, strict);
        });
        py::list out;
        for (const FeatureKind& k : kinds) {
          out.append(py::make_tuple(py::bytes(k.name), k.kind ? py::cast(*k.kind) : py::none(),
                                    k.first_record));
        }
        return out;
      },
      py::arg("batch"), py::arg("name"), py::arg("sequence_examples") = false,
      py::arg("strict") = true,
      "[(name as bytes, kind, first record)] of the features the records hold (kind None: a\n"
      "Feature with no list); strict=False stops before the first damaged record.");
  m.def(
      "decode_examples",
      [](const py::object& batch_obj, const py::object& spec_obj, const std::string& name,
         bool sequence_examples, const py::object& num_threads, bool presence,
         const py::object& pool_obj) {
        const auto& batch = batch_obj.cast<const RecordBatch&>();
        FieldSpecs listed;  // specs given as a list: copied for this call
        const bool compiled = py::isinstance<FieldSpecs>(spec_obj);
        if (!compiled) listed = field_specs(spec_obj);
        const std::vector<FieldSpec>& specs =
            compiled ? spec_obj.cast<const FieldSpecs&>().specs : listed.specs;
        // (an object, not a shared_ptr argument: pybind11 takes None for one only on its second,
        // converting pass over all the arguments, which costs more than a small decode)
        const auto pool = pool_obj.is_none() ? std::shared_ptr<BufferPool>()
                                             : pool_obj.cast<std::shared_ptr<BufferPool>>();
        size_t threads = 1;
        if (num_threads.is_none()) {
          threads = decode_threads_worth(batch.size(), batch.data.size());
          if (threads > 1) threads = std::min(threads, usable_cores());
        } else {
          const auto wanted = num_threads.cast<long long>();
          if (wanted < 1) throw py::value_error("num_threads must be positive or None");
          threads = size_t(wanted);
        }
        std::vector<Column> columns = naming_source(name, [&] {
          py::gil_scoped_release release;
          return decode_examples(batch.data.data(), batch.offsets.data(), batch.size(), specs,
                                 sequence_examples, threads, pool.get());
        });
        py::list out(columns.size());
        for (size_t k = 0; k < columns.size(); ++k) {
          out[k] = column_arrays(columns[k], specs[k], presence, pool);
        }
        return out;
      },
      // Not keyword-only: pybind11 makes a string per keyword argument on every call, which
      // costs more than decoding a small batch; tfrec_fast passes them by position.
      py::arg("batch"), py::arg("specs"), py::arg("name"), py::arg("sequence_examples") = false,
      py::arg("num_threads") = py::none(), py::arg("presence") = true, py::arg("pool") = py::none(),
      "Decodes the Examples (or SequenceExamples) of a RecordBatch into raw columns: per spec\n"
      "(values, starts, ends, row_splits, step_splits, present), each an array where the\n"
      "layout has it and None elsewhere. values: int64 / float32 numbers, or uint8 raw bytes;\n"
      "starts/ends: bytes values; present (with presence=True): 1 per record holding a VarLen.\n"
      "specs: a FieldSpecs (checked and copied once), or a list of FieldSpec (every call).\n"
      "num_threads: None picks from the batch's size and the cores (1 for small batches);\n"
      "the parts are decoded on a persistent pool, with the GIL released once.\n"
      "pool: a BufferPool for the values of large fixed-size columns (at least 1 MiB), which\n"
      "go back to it when their arrays die.");
  m.def("_task_pool_threads", &task_pool_threads,
        "How many worker threads the process's decode pool has started (tests).");
  // A child made by fork has none of the parent's pool threads: it starts its own when needed.
  py::module_ os = py::module_::import("os");
  if (py::hasattr(os, "register_at_fork")) {
    os.attr("register_at_fork")(py::arg("after_in_child") = py::cpp_function([] {
                                  forget_task_pool_after_fork();
                                  forget_usable_cores();
                                }));
  }
}

}  // namespace tfr::py_bind
