// Function export (MLX's export_function, import_function, exporter,
// FunctionExporter and export_to_dot) over tessera/io/export.h.
#include <fstream>
#include <sstream>

#include "convert.h"

namespace tessera::python {

namespace {

std::string path_of(nb::handle file, const char* op) {
  if (auto path = as_path(file)) return *path;
  throw nb::type_error((std::string("[") + op + "] file must be a path (str or os.PathLike), not " +
                        nb::type_name(file.type()).c_str())
                           .c_str());
}

bool arrays_of(nb::handle seq, Args& out) {
  if (!PyList_Check(seq.ptr()) && !PyTuple_Check(seq.ptr())) return false;
  for (nb::handle e : seq) {
    if (!nb::isinstance<array>(e)) return false;
    out.push_back(nb::cast<array>(e));
  }
  return true;
}

bool keyword_arrays_of(nb::handle d, Kwargs& out) {
  if (!PyDict_Check(d.ptr())) return false;
  for (auto [k, v] : nb::borrow<nb::dict>(d)) {
    if (!nb::isinstance<nb::str>(k) || !nb::isinstance<array>(v)) return false;
    out.insert_or_assign(nb::cast<std::string>(k), nb::cast<array>(v));
  }
  return true;
}

// MLX's forms of the inputs: arrays as *args and **kwargs, or one tuple (or
// list) of arrays and/or one dict of str to array.
std::pair<Args, Kwargs> inputs_of(const nb::args& args, const nb::kwargs& kwargs, const char* op) {
  auto check = [op](bool valid) {
    if (!valid) {
      throw std::invalid_argument(
          std::string("[") + op +
          "] Inputs can either be a variable number of positional and keyword arrays or a "
          "single tuple and/or dictionary of arrays.");
    }
  };
  Args a;
  Kwargs k;
  if (args.size() == 0 || nb::isinstance<array>(args[0])) {
    check(arrays_of(args, a) && keyword_arrays_of(kwargs, k));
  } else if (args.size() == 1) {
    check(kwargs.size() == 0 && (arrays_of(args[0], a) || keyword_arrays_of(args[0], k)));
  } else if (args.size() == 2) {
    check(kwargs.size() == 0 && arrays_of(args[0], a) && keyword_arrays_of(args[1], k));
  } else {
    check(false);
  }
  return {std::move(a), std::move(k)};
}

// fun called on (*args, **kwargs), returning an array or a tuple or list of them.
ExportFn wrap(nb::object fun) {
  auto holder = std::make_shared<PyFn>(std::move(fun));
  return [holder](const Args& args, const Kwargs& kwargs) {
    nb::gil_scoped_acquire gil;
    nb::list positional;
    for (const auto& x : args) positional.append(x);
    nb::dict keyword;
    for (const auto& [name, x] : kwargs) keyword[nb::str(name.c_str(), name.size())] = x;
    nb::object out = holder->f(*nb::tuple(positional), **keyword);
    Args outputs;
    if (nb::isinstance<array>(out)) {
      outputs.push_back(nb::cast<array>(out));
    } else if (!arrays_of(out, outputs)) {
      throw std::invalid_argument(
          "[export_function] Outputs can be either a single array, a tuple, or a list of arrays.");
    }
    return outputs;
  };
}

nb::object to_python(const ExportValue& v) {
  return std::visit(
      [](const auto& x) -> nb::object {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, std::monostate>) {
          return nb::none();
        } else if constexpr (std::is_same_v<X, std::vector<ExportValue>>) {
          nb::list l;
          for (const auto& e : x) l.append(to_python(e));
          return std::move(l);
        } else {
          return nb::cast(x);
        }
      },
      v.value);
}

nb::dict to_python(const ExportCallbackInput& input) {
  nb::dict d;
  for (const auto& [key, value] : input) {
    d[key.c_str()] = std::visit(
        [](const auto& x) -> nb::object {
          using X = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<X, std::string>) {
            return nb::str(x.c_str(), x.size());
          } else {
            nb::list l;
            for (const auto& e : x) {
              if constexpr (std::is_same_v<X, std::vector<ExportValue>>) {
                l.append(to_python(e));
              } else if constexpr (std::is_same_v<
                                       X, std::vector<std::tuple<std::string, Shape, Dtype>>>) {
                nb::list shape;
                for (auto n : std::get<1>(e)) shape.append(n);
                l.append(nb::make_tuple(std::get<0>(e), nb::tuple(shape), std::get<2>(e)));
              } else {
                l.append(nb::make_tuple(e.first, e.second));
              }
            }
            return std::move(l);
          }
        },
        value);
  }
  return d;
}

ExportCallback wrap_callback(nb::object callback) {
  auto holder = std::make_shared<PyFn>(std::move(callback));
  return [holder](const ExportCallbackInput& input) {
    nb::gil_scoped_acquire gil;
    holder->f(to_python(input));
  };
}

}  // namespace

void init_export(nb::module_& m) {
  m.def(
      "export_function",
      named("export_function",
            [](nb::handle file_or_callback, nb::callable fun, nb::args args, bool shapeless,
               std::optional<std::string> metadata, nb::kwargs kwargs) {
              auto [a, k] = inputs_of(args, kwargs, "export_function");
              if (auto path = as_path(file_or_callback)) {
                export_function(*path, wrap(fun), a, k, shapeless, metadata.value_or(""));
                return;
              }
              if (!PyCallable_Check(file_or_callback.ptr())) {
                throw nb::type_error(
                    (std::string(
                         "[export_function] file_or_callback must be a path or a callable, not ") +
                     nb::type_name(file_or_callback.type()).c_str())
                        .c_str());
              }
              if (metadata) {
                throw std::invalid_argument(
                    "[export_function] The metadata argument is only supported when exporting to a "
                    "file, not when using a callback.");
              }
              export_function(wrap_callback(nb::borrow(file_or_callback)), wrap(fun), a, k,
                              shapeless);
            }),
      "file_or_callback"_a, "fun"_a, "args"_a, nb::kw_only(), "shapeless"_a = false,
      "metadata"_a = nb::none(), "kwargs"_a,
      nb::sig("def export_function(file_or_callback: str | Callable, fun: Callable, *args, "
              "shapeless: bool = False, metadata: str | None = None, **kwargs) -> None"),
      R"(Export a function to a file, or hand its graph to a callback.

fun runs once on placeholders of the example inputs (arrays as *args and
**kwargs, or one tuple of arrays and/or one dict of str to array); its graph
and the arrays it captured are saved. shapeless: the imported function also
accepts inputs of other shapes with the same dimensions and dtypes. metadata:
a string saved with the function (files only). The format is Tessera's own:
MLX's .mlxfn files and Tessera's are not interchangeable.)");

  m.def("import_function",
        named("import_function",
              [](nb::handle file, bool return_metadata) -> nb::object {
                ImportedFunction fn = import_function(path_of(file, "import_function"));
                nb::object f = nb::cpp_function(
                    [fn](nb::args args, nb::kwargs kwargs) {
                      auto [a, k] = inputs_of(args, kwargs, "import_function::call");
                      nb::list out;
                      for (auto& x : fn(a, k)) out.append(x);
                      return nb::tuple(out);
                    },
                    nb::name("imported_function"),
                    nb::sig("def imported_function(*args, **kwargs) -> tuple[array, ...]"));
                if (return_metadata) return nb::make_tuple(f, fn.metadata());
                return f;
              }),
        "file"_a, "return_metadata"_a = false,
        nb::sig("def import_function(file: str, return_metadata: bool = False) -> "
                "Callable | tuple[Callable, str]"),
        R"(Import a function that export_function or exporter saved.

The function takes arrays as *args and **kwargs, or one tuple of arrays and/or
one dict of str to array, and always returns a tuple of arrays. With
return_metadata, (function, metadata) is returned.)");

  nb::class_<FunctionExporter>(m, "FunctionExporter",
                               "Records one trace of a function per call, to one file "
                               "(made by exporter()).")
      .def("close", &FunctionExporter::close, "Completes the file; later calls raise.")
      .def(
          "__enter__", [](FunctionExporter& e) -> FunctionExporter& { return e; },
          nb::rv_policy::reference)
      .def(
          "__exit__", [](FunctionExporter& e, nb::handle, nb::handle, nb::handle) { e.close(); },
          "exc_type"_a = nb::none(), "exc_value"_a = nb::none(), "traceback"_a = nb::none())
      .def("__call__", [](FunctionExporter& e, nb::args args, nb::kwargs kwargs) {
        auto [a, k] = inputs_of(args, kwargs, "export_function");
        e(a, k);
      });

  m.def("exporter",
        named("exporter",
              [](nb::handle file, nb::callable fun, bool shapeless,
                 std::optional<std::string> metadata) {
                return exporter(path_of(file, "exporter"), wrap(fun), shapeless,
                                metadata.value_or(""));
              }),
        "file"_a, "fun"_a, nb::kw_only(), "shapeless"_a = false, "metadata"_a = nb::none(),
        R"(A FunctionExporter that saves one trace of fun per call to file, with
metadata; use it as a context manager or call close().)");

  m.def("export_to_dot",
        named("export_to_dot",
              [](nb::handle file, nb::args args, nb::kwargs kwargs) {
                Args outputs;
                for_each_leaf(args, "export_to_dot", [&](nb::handle leaf) {
                  if (!nb::isinstance<array>(leaf)) {
                    throw std::invalid_argument(
                        std::string(
                            "[export_to_dot] the outputs must be arrays (or lists, tuples and "
                            "dicts of arrays), not ") +
                        nb::type_name(leaf.type()).c_str());
                  }
                  outputs.push_back(nb::cast<array>(leaf));
                });
                NodeNamer namer;
                for (auto [k, v] : kwargs) {
                  if (!nb::isinstance<array>(v)) {
                    throw std::invalid_argument(
                        "[export_to_dot] the name " + nb::cast<std::string>(k) +
                        " must name an array, not a " + nb::type_name(v.type()).c_str());
                  }
                  namer.set_name(nb::cast<array>(v), nb::cast<std::string>(k));
                }
                if (auto path = as_path(file)) {
                  std::ofstream out(*path);
                  if (!out)
                    throw std::runtime_error("[export_to_dot] cannot create '" + *path + "'");
                  export_to_dot(out, namer, outputs);
                } else if (nb::hasattr(file, "write")) {
                  std::ostringstream out;
                  export_to_dot(out, namer, outputs);
                  file.attr("write")(out.str());
                } else {
                  throw std::invalid_argument(
                      "[export_to_dot] file must be a path or a file-like object with write()");
                }
              }),
        "file"_a, "args"_a, "kwargs"_a,
        nb::sig("def export_to_dot(file: object, *args, **kwargs) -> None"),
        R"(Write the graph of the output arrays (*args) in Graphviz DOT to file (a
path or an object with write()); keyword arguments name arrays of the graph.)");
}

}  // namespace tessera::python
