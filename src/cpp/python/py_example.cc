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

FieldSpec to_spec(const py::tuple& t) {
  FieldSpec s;
  s.name = t[0].cast<std::string>();
  s.kind = ValueKind(t[1].cast<int>());
  s.layout = Layout(t[2].cast<int>());
  s.count = t[3].cast<size_t>();
  if (!t[4].is_none()) {
    s.has_default = true;
    PyBytesView view(t[4]);
    s.default_value.assign(view.data(), view.data() + view.size());
  }
  s.sequence = t[5].cast<bool>();
  s.required = t[6].cast<bool>();
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

void register_example(py::module_& m) {
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
          out.append(py::make_tuple(py::bytes(k.name), k.kind, k.first_record));
        }
        return out;
      },
      py::arg("batch"), py::arg("name"), py::arg("sequence_examples") = false,
      py::arg("strict") = true,
      "[(name as bytes, kind, first record)] of the features the records hold (kind -1: a\n"
      "Feature with no list); strict=False stops before the first damaged record.");
  m.def(
      "decode_examples",
      [](const py::object& batch_obj, const py::list& spec_tuples, const std::string& name,
         bool sequence_examples) {
        const auto& batch = batch_obj.cast<const RecordBatch&>();
        std::vector<FieldSpec> specs;
        for (py::handle t : spec_tuples) specs.push_back(to_spec(t.cast<py::tuple>()));
        std::vector<Column> columns = naming_source(name, [&] {
          py::gil_scoped_release release;
          return decode_examples(batch.data.data(), batch.offsets.data(), batch.size(), specs,
                                 sequence_examples);
        });
        py::list out;
        for (Column& c : columns) {
          out.append(py::make_tuple(adopt<uint8_t>(std::move(c.values)), adopt<int64_t>(std::move(c.starts)),
                                    adopt<int64_t>(std::move(c.ends)), adopt<int64_t>(std::move(c.row_splits)),
                                    adopt<int64_t>(std::move(c.step_splits)), adopt<uint8_t>(std::move(c.present))));
        }
        return out;
      },
      py::arg("batch"), py::arg("specs"), py::arg("name"), py::arg("sequence_examples") = false,
      "Decodes the Examples (or SequenceExamples) of a RecordBatch into raw columns\n"
      "(values, starts, ends, row_splits, step_splits, present: 1 per record holding a VarLen).");
}

}  // namespace tfr::py_bind
