// compile (MLX's mlx/compile.h): a function traced once per input signature
// and replayed from its recorded graph.
//
//   auto step = compile([](const std::vector<array>& x) {
//     return std::vector<array>{exp(x[0]) * x[1] + exp(x[0])};
//   });
//   auto y = step({a, b});   // traced: fun runs on placeholders, its graph is kept
//   auto z = step({c, d});   // same dtypes and shapes: replayed, fun does not run
//
// Note [compile]
// The first call with a given signature (each input's dtype and shape, and the
// default stream) runs fun on placeholder arrays. Placeholders have the inputs'
// dtypes and shapes but no data: evaluating anything computed from them during
// the trace raises. The nodes between the placeholders and the outputs are
// recorded in order, with common subexpressions merged (two nodes of
// equivalent primitives on the same inputs become one). Arrays fun reads
// that do not depend on its inputs (closures, constants it creates) are
// recorded as they are: their values are frozen at the trace. Later calls
// with the signature rebuild the lazy graph from the record, node by node,
// on the new inputs, without running fun. The result is the graph fun would
// have built, so every transform applies to a compiled function and a
// compiled function may contain any transform.
//
// In the enabled mode, chains of elementwise ops in the record are fused into
// one Compiled node each (Note [Fusion] in compile.cpp): one pass over memory
// on each device. `shapeless` functions are traced again for each new shape
// (docs/differences.md). A compiled function called while another is traced
// runs fun itself, so the outer record, and its fusion, see its primitives.
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/transforms/transforms.h"

namespace tessera {

enum class CompileMode { disabled, no_simplify, no_fuse, enabled };

// The mode is read at each call: disabled calls fun itself; no_simplify
// records without merging common subexpressions; no_fuse and enabled merge
// them; enabled also fuses elementwise chains.
VecFn compile(VecFn fun, bool shapeless = false);
VecFn compile(std::vector<array> (*fun)(const std::vector<array>&), bool shapeless = false);
template <typename F,
          typename = std::enable_if_t<std::is_convertible_v<
              F, std::vector<array> (*)(const std::vector<array>&)>>>
VecFn compile(F&& captureless_lambda, bool shapeless = false) {
  return compile(static_cast<std::vector<array> (*)(const std::vector<array>&)>(
                     std::forward<F>(captureless_lambda)),
                 shapeless);
}

// Global switches. The environment variable MLX_DISABLE_COMPILE (any value)
// starts the process with compile disabled; enable_compile overrides it.
void disable_compile();
void enable_compile();
void set_compile_mode(CompileMode mode);
CompileMode compile_mode();

namespace detail {
// The names of the primitives in the unevaluated graph behind `outputs`,
// inputs before users (to see what a compiled function runs).
std::vector<std::string> graph_primitives(const std::vector<array>& outputs);
}  // namespace detail

}  // namespace tessera
