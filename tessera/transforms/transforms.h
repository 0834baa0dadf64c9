// Function transforms: vjp, jvp, grad, value_and_grad, vmap (MLX's
// mlx/transforms.h). Each builds a lazy graph from the rules of the primitives
// (Primitive::vjp, jvp, vmap), so transforms compose: grad(grad(f)),
// vmap(grad(f)), jvp of a vjp.
//
//   auto f = [](const array& x) { return sum(exp(x)); };
//   array g = grad(f)(array({1.f, 2.f}));            // exp(x)
//   auto [out, tangent] = jvp(f, array(0.f), array(1.f));
//   auto batched = vmap([](const array& x) { return sum(x); })(ones({4, 3}));  // shape (4)
//
// Note [Tracers]
// A transform calls the user's function on fresh copies of the primals
// (tracers); every array computed from a tracer is a tracer too. While a
// transform runs (array::TracingScope), eval() keeps the graph of tracers (it
// does not detach their nodes), so a function may evaluate and read
// intermediate values (a while-loop on item()) and still be differentiated.
// Once the transform has returned, its results evaluate like any array: nodes
// are released as they run.
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "tessera/core/array.h"

namespace tessera {

using VecFn = std::function<std::vector<array>(const std::vector<array>&)>;

// (outputs, one vjp per primal): cotangents match the outputs.
std::pair<std::vector<array>, std::vector<array>> vjp(const VecFn& fun,
                                                      const std::vector<array>& primals,
                                                      const std::vector<array>& cotangents);
std::pair<array, array> vjp(const std::function<array(const array&)>& fun, const array& primal,
                            const array& cotangent);

// (outputs, one tangent per output): tangents match the primals.
std::pair<std::vector<array>, std::vector<array>> jvp(const VecFn& fun,
                                                      const std::vector<array>& primals,
                                                      const std::vector<array>& tangents);
std::pair<array, array> jvp(const std::function<array(const array&)>& fun, const array& primal,
                            const array& tangent);

using ValueAndGradFn =
    std::function<std::pair<std::vector<array>, std::vector<array>>(const std::vector<array>&)>;
using SimpleValueAndGradFn =
    std::function<std::pair<array, std::vector<array>>(const std::vector<array>&)>;

// The first output must be a 0-d scalar; the other outputs get no gradient.
// Gradients w.r.t. the inputs at argnums, in ascending order.
ValueAndGradFn value_and_grad(const VecFn& fun, const std::vector<int>& argnums);
ValueAndGradFn value_and_grad(const VecFn& fun, int argnum = 0);
std::function<std::pair<array, array>(const array&)> value_and_grad(
    const std::function<array(const array&)>& fun);
SimpleValueAndGradFn value_and_grad(const std::function<array(const std::vector<array>&)>& fun,
                                    const std::vector<int>& argnums);
SimpleValueAndGradFn value_and_grad(const std::function<array(const std::vector<array>&)>& fun,
                                    int argnum = 0);
VecFn grad(const std::function<array(const std::vector<array>&)>& fun,
           const std::vector<int>& argnums);
VecFn grad(const std::function<array(const std::vector<array>&)>& fun, int argnum = 0);
std::function<array(const array&)> grad(const std::function<array(const array&)>& fun);

// Vectorises fun over an axis of its inputs; an axis of -1 (vector form) means
// "not mapped". Empty in_axes/out_axes: all 0.
std::function<array(const array&)> vmap(const std::function<array(const array&)>& fun,
                                        int in_axis = 0, int out_axis = 0);
std::function<array(const array&, const array&)> vmap(
    const std::function<array(const array&, const array&)>& fun, int in_axis_a = 0,
    int in_axis_b = 0, int out_axis = 0);
VecFn vmap(const VecFn& fun, const std::vector<int>& in_axes = {},
           const std::vector<int>& out_axes = {});

using CustomVjp = std::function<std::vector<array>(const std::vector<array>& primals,
                                                   const std::vector<array>& cotangents,
                                                   const std::vector<array>& outputs)>;
using CustomJvp = std::function<std::vector<array>(const std::vector<array>& primals,
                                                   const std::vector<array>& tangents,
                                                   const std::vector<int>& argnums)>;
using CustomVmap = std::function<std::pair<std::vector<array>, std::vector<int>>(
    const std::vector<array>& inputs, const std::vector<int>& axes)>;

// fun with transform rules of the caller's: a missing rule falls back to the
// transform of fun itself. fun_vjp returns one cotangent per primal.
VecFn custom_function(VecFn fun, std::optional<CustomVjp> fun_vjp = std::nullopt,
                      std::optional<CustomJvp> fun_jvp = std::nullopt,
                      std::optional<CustomVmap> fun_vmap = std::nullopt);
VecFn custom_vjp(VecFn fun, CustomVjp fun_vjp);
// fun whose intermediate values are not kept for the backward pass: its vjp
// runs fun again. Trades compute for memory.
VecFn checkpoint(VecFn fun);

}  // namespace tessera
