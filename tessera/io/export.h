// Exporting functions (MLX's mlx/export.h): a function traced on example
// inputs and saved with its graph and the constants it captured, to run later,
// in another process, from C++ or Python, without the code that defined it.
//
//   auto fun = [](const Args& x) { return std::vector<array>{exp(x[0]) + x[1]}; };
//   export_function("f.mlxfn", fun, {ones({2, 3}), ones({2, 3})});
//   ImportedFunction f = import_function("f.mlxfn");
//   std::vector<array> y = f({a, b});           // {exp(a) + b}, for a and b of (2,3) float32
//
//   auto ex = exporter("g.mlxfn", fun);        // several traces in one file
//   ex({ones({2}), ones({2})});
//   ex({ones({3}), ones({3})});
//   ex.close();                                 // the file appears complete
//
//   export_to_dot(std::cout, {y[0]});           // a graph in Graphviz DOT
//
// Note [Exported functions]
// export_function runs fun once on placeholders of the inputs' shapes and
// dtypes (as compile traces, Note [compile] in transforms/compile.h) and keeps
// the unevaluated nodes behind the outputs, inputs before users, down to the
// inputs and to evaluated arrays. Those (weights fun closes over, scalars) are
// the constants, saved with their data: their values are frozen at the
// export. A file holds one trace per exporter call; a call of the imported
// function runs the trace whose signature (positional count, keyword names, and
// each input's shape and dtype) matches its inputs, rebuilding the nodes as a
// lazy graph on the default stream of the default device, so an exported
// function runs on any device and under every transform. With shapeless, a
// trace also matches inputs of other shapes of the same dimensions and dtypes:
// the nodes' output shapes are then inferred again, and a node whose shapes
// cannot be inferred (a pad, a slice of part of an axis whose size changed)
// raises std::invalid_argument at the call.
// Nodes of a compiled function are exported as the primitives they fused, those
// of a custom_function as the function's own graph. The file format is
// Tessera's own (Note [The export file] in io/export.cpp): MLX's .mlxfn files
// and Tessera's are not interchangeable.
//
// Errors: a function with a primitive that cannot be exported, inputs or
// outputs that are not arrays, metadata with a callback, and a call matching no
// trace raise std::invalid_argument; a file that cannot be opened or written,
// is not an export, is truncated or comes from a newer format raises
// std::runtime_error, as does an exporter used after close().
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "tessera/core/array.h"

namespace tessera {

using Args = std::vector<array>;
using Kwargs = std::unordered_map<std::string, array>;

// A primitive's parameter as export sees it: none (an unset optional), a bool,
// an integer (enums too), a floating-point number, a dtype, a string, or a
// list of these.
struct ExportValue {
  std::variant<std::monostate, bool, int64_t, double, Dtype, std::string, std::vector<ExportValue>>
      value;
};

// What a callback receives, once per item of a trace (MLX's): a map with "type"
// one of "inputs" ("inputs": (name, shape, dtype) of every input, positional
// then keyword), "keyword_inputs" ("keywords": (keyword, name)), "outputs"
// ("outputs": (name, shape, dtype)), "constants" ("constants": (name, array)),
// and then one "primitive" per node, in order ("name", "arguments": its
// parameters, "inputs" and "outputs" as (name, shape, dtype)).
using ExportCallbackInput =
    std::unordered_map<std::string, std::variant<std::vector<std::tuple<std::string, Shape, Dtype>>,
                                                 std::vector<std::pair<std::string, array>>,
                                                 std::vector<std::pair<std::string, std::string>>,
                                                 std::vector<ExportValue>, std::string>>;
using ExportCallback = std::function<void(const ExportCallbackInput&)>;

// Records one trace of a function per call, to a file or a callback.
class FunctionExporter {
 public:
  void operator()(std::initializer_list<array> args) { (*this)(Args(args)); }
  void operator()(const Args& args);
  void operator()(const Kwargs& kwargs);
  void operator()(const Args& args, const Kwargs& kwargs);
  // Completes the file (it appears under its name only now); later calls raise.
  void close();

  ~FunctionExporter();  // closes
  FunctionExporter(FunctionExporter&&) noexcept;
  FunctionExporter& operator=(FunctionExporter&&) noexcept;
  FunctionExporter(const FunctionExporter&) = delete;
  FunctionExporter& operator=(const FunctionExporter&) = delete;

  // Made by exporter(): the trace so far and the file or callback.
  struct State;
  explicit FunctionExporter(std::unique_ptr<State> state);

 private:
  std::unique_ptr<State> state_;
};

using ExportFn = std::function<std::vector<array>(const Args&, const Kwargs&)>;

// An exporter that writes the traces of fun to `file` (replacing it once closed).
FunctionExporter exporter(const std::string& file,
                          const std::function<std::vector<array>(const Args&)>& fun,
                          bool shapeless = false, const std::string& metadata = "");
FunctionExporter exporter(const std::string& file,
                          const std::function<std::vector<array>(const Kwargs&)>& fun,
                          bool shapeless = false, const std::string& metadata = "");
FunctionExporter exporter(const std::string& file, const ExportFn& fun, bool shapeless = false,
                          const std::string& metadata = "");
// An exporter that hands each trace to callback.
FunctionExporter exporter(const ExportCallback& callback,
                          const std::function<std::vector<array>(const Args&)>& fun,
                          bool shapeless = false);
FunctionExporter exporter(const ExportCallback& callback,
                          const std::function<std::vector<array>(const Kwargs&)>& fun,
                          bool shapeless = false);
FunctionExporter exporter(const ExportCallback& callback, const ExportFn& fun,
                          bool shapeless = false);

// One trace of fun on these inputs, to a file with its metadata.
void export_function(const std::string& file,
                     const std::function<std::vector<array>(const Args&)>& fun, const Args& args,
                     bool shapeless = false, const std::string& metadata = "");
void export_function(const std::string& file,
                     const std::function<std::vector<array>(const Kwargs&)>& fun,
                     const Kwargs& kwargs, bool shapeless = false,
                     const std::string& metadata = "");
void export_function(const std::string& file, const ExportFn& fun, const Args& args,
                     const Kwargs& kwargs, bool shapeless = false,
                     const std::string& metadata = "");
// One trace of fun on these inputs, to callback.
void export_function(const ExportCallback& callback,
                     const std::function<std::vector<array>(const Args&)>& fun, const Args& args,
                     bool shapeless = false);
void export_function(const ExportCallback& callback,
                     const std::function<std::vector<array>(const Kwargs&)>& fun,
                     const Kwargs& kwargs, bool shapeless = false);
void export_function(const ExportCallback& callback, const ExportFn& fun, const Args& args,
                     const Kwargs& kwargs, bool shapeless = false);

// A function read from a file: callable from any thread, on any device.
class ImportedFunction {
 public:
  std::vector<array> operator()(std::initializer_list<array> args) const {
    return (*this)(Args(args));
  }
  std::vector<array> operator()(const Args& args) const;
  std::vector<array> operator()(const Kwargs& kwargs) const;
  std::vector<array> operator()(const Args& args, const Kwargs& kwargs) const;
  // The metadata string saved with the function.
  const std::string& metadata() const;

  // Made by import_function(): the traces read from the file.
  struct Table;
  explicit ImportedFunction(std::shared_ptr<const Table> table) : table_(std::move(table)) {}

 private:
  std::shared_ptr<const Table> table_;
};

ImportedFunction import_function(const std::string& file);

// Names of the arrays of a graph for export_to_dot (MLX's): given names, and
// "A", "B", ..., "Z", "AA", ... for the others in the order they are asked for.
struct NodeNamer {
  std::unordered_map<std::uintptr_t, std::string> names;
  const std::string& get_name(const array& x);
  void set_name(const array& x, std::string name);
};

// The unevaluated graph behind outputs in Graphviz DOT: a box per node, its
// inputs' and outputs' names, the evaluated arrays it reads as sources and the
// outputs as sinks.
void export_to_dot(std::ostream& os, NodeNamer namer, const std::vector<array>& outputs);
void export_to_dot(std::ostream& os, const std::vector<array>& outputs);

}  // namespace tessera
