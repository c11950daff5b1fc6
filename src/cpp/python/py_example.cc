// tf.train.Example decoding for Python: specs in, numpy columns out, GIL released in between.
#include "example_decoder.h"
#include "py_common.h"

namespace tfr::py_bind {
namespace {

// Hands a buffer to numpy without copying: the array owns it through a capsule.
template <typename T, typename Buffer>
py::array adopt(Buffer&& buffer) {
  static const T kEmpty{};
  const size_t count = buffer.size() * sizeof(*buffer.data()) / sizeof(T);
  auto* owned = new Buffer(std::move(buffer));
  py::capsule owner(owned, [](void* p) { delete static_cast<Buffer*>(p); });
  const T* ptr = count ? reinterpret_cast<const T*>(owned->data()) : &kEmpty;
  return py::array(py::dtype::of<T>(), {py::ssize_t(count)}, {py::ssize_t(sizeof(T))}, ptr, owner);
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
                               return py::bytes(reinterpret_cast<const char*>(s.default_value.data()),
                                                s.default_value.size());
                             })
      .def_readonly("sequence", &FieldSpec::sequence)
      .def_readonly("required", &FieldSpec::required)
      .def("__repr__", [](const FieldSpec& s) {
        return "FieldSpec(" + py::repr(py::str(s.name)).cast<std::string>() + ", " +
               py::repr(py::cast(s.kind)).cast<std::string>() + ", " +
               py::repr(py::cast(s.layout)).cast<std::string>() + ", count=" + std::to_string(s.count) +
               (s.has_default ? ", default=..." : "") + (s.sequence ? ", sequence=True" : "") +
               (s.required ? ", required=True" : "") + ")";
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
      [](const py::object& batch_obj, const py::list& spec_list, const std::string& name,
         bool sequence_examples) {
        const auto& batch = batch_obj.cast<const RecordBatch&>();
        std::vector<FieldSpec> specs;
        for (py::handle s : spec_list) {
          if (!py::isinstance<FieldSpec>(s)) {
            throw py::type_error(std::string("specs are FieldSpec objects, not ") + Py_TYPE(s.ptr())->tp_name);
          }
          specs.push_back(s.cast<const FieldSpec&>());
        }
        std::vector<Column> columns = naming_source(name, [&] {
          py::gil_scoped_release release;
          return decode_examples(batch.data.data(), batch.offsets.data(), batch.size(), specs,
                                 sequence_examples);
        });
        py::list out;
        for (Column& c : columns) {
          out.append(py::make_tuple(adopt<uint8_t>(std::move(c.values)), adopt<int64_t>(std::move(c.starts)),
                                    adopt<int64_t>(std::move(c.ends)), adopt<int64_t>(std::move(c.row_splits)),
                                    adopt<int64_t>(std::move(c.step_splits)),
                                    adopt<uint8_t>(std::move(c.present))));
        }
        return out;
      },
      py::arg("batch"), py::arg("specs"), py::arg("name"), py::arg("sequence_examples") = false,
      "Decodes the Examples (or SequenceExamples) of a RecordBatch into raw columns\n"
      "(values, starts, ends, row_splits, step_splits, present: 1 per record holding a VarLen).");
}

}  // namespace tfr::py_bind
