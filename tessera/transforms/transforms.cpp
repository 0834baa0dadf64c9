#include "tessera/transforms/transforms.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "tessera/core/primitive.h"
#include "tessera/ops/ops.h"
#include "tessera/transforms/tape.h"

namespace tessera {

namespace detail {

std::vector<array> trace_tape(const std::vector<array>& outputs,
                              const std::unordered_set<std::uintptr_t>& cut) {
  std::vector<array> tape;
  std::unordered_set<const void*> seen, dependent;
  std::vector<std::pair<array, size_t>> stack;
  auto depends = [&](const array& a) {
    return cut.count(a.id()) > 0 || (a.has_primitive() && dependent.count(a.node()) > 0);
  };
  auto visit = [&](const array& a) {
    if (!a.is_tracer() || !a.has_primitive() || cut.count(a.id())) return;
    if (!seen.insert(a.node()).second) return;
    stack.emplace_back(a, 0);
  };
  for (auto& out : outputs) {
    visit(out);
    while (!stack.empty()) {
      auto& [arr, next] = stack.back();
      const auto& inputs = arr.inputs();
      if (next < inputs.size()) {
        const array in = inputs[next++];
        visit(in);
      } else {
        if (std::any_of(inputs.begin(), inputs.end(), depends)) {
          dependent.insert(arr.node());
          tape.push_back(arr);
        }
        stack.pop_back();
      }
    }
  }
  return tape;
}

std::vector<array> graph_nodes(const std::vector<array>& outputs,
                               const std::function<bool(const array&)>& leaf) {
  std::vector<array> nodes;
  std::unordered_set<const void*> seen;
  std::vector<std::pair<array, bool>> stack;  // (array, inputs done)
  for (auto it = outputs.rbegin(); it != outputs.rend(); ++it) stack.emplace_back(*it, false);
  while (!stack.empty()) {
    auto [a, done] = stack.back();
    stack.pop_back();
    if (leaf(a)) continue;
    if (done) {
      nodes.push_back(std::move(a));
      continue;
    }
    if (!seen.insert(a.node()).second) continue;
    stack.emplace_back(a, true);
    const auto& ins = a.inputs();
    for (auto in = ins.rbegin(); in != ins.rend(); ++in) stack.emplace_back(*in, false);
  }
  return nodes;
}

namespace {

class Placeholder : public UnaryPrimitive {
 public:
  Placeholder(Stream s, const char* transform) : UnaryPrimitive(s), transform_(transform) {}
  void eval_cpu(const std::vector<array>&, array&) override { fail(); }
  void eval_gpu(const std::vector<array>&, array&) override { fail(); }
  const char* name() const override { return "Placeholder"; }

 private:
  [[noreturn]] void fail() const {
    throw std::invalid_argument(
        std::string("[") + transform_ +
        "] cannot evaluate an array computed from the inputs of a function while " +
        transform_ + " traces it (item(), conversions to Python or NumPy, boolean masks: "
        "the trace must not depend on the inputs' values)");
  }
  const char* transform_;
};

}  // namespace

array placeholder(const Shape& shape, Dtype dtype, const char* transform) {
  array p(shape, dtype, std::make_shared<Placeholder>(to_stream(std::monostate{}), transform),
          {});
  p.set_tracer(true);
  return p;
}

}  // namespace detail

namespace {

using detail::trace_tape;

// A tracer standing for x: a new node (so the graph can be cut there) with
// x's value. It shares x's buffer when x is dense (a Contiguous node), so a
// transform of a function of large parameters copies none of them.
array make_tracer(const array& x) {
  array t = contiguous(x, /*allow_col_major=*/true);
  t.set_tracer(true);
  return t;
}

// All outputs of the node behind a, in position order (dropped ones made
// again: rules of factorizations need every output).
std::vector<array> node_outputs(const array& a) { return a.outputs(); }

void check_same_shapes(const char* op, const char* what, const std::vector<array>& a,
                       const std::vector<array>& b) {
  if (a.size() != b.size()) {
    std::ostringstream msg;
    msg << "[" << op << "] got " << b.size() << " " << what << " for " << a.size()
        << (std::string(what) == "cotangents" ? " outputs" : " primals");
    throw std::invalid_argument(msg.str());
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].shape() != b[i].shape()) {
      std::ostringstream msg;
      msg << "[" << op << "] " << what << " " << i << " has shape " << shape_str(b[i].shape())
          << " but must have shape " << shape_str(a[i].shape());
      throw std::invalid_argument(msg.str());
    }
  }
}

// Reverse mode: fun's outputs and the cotangents of primals, given the
// cotangents of the outputs (made from the outputs by `seed`; an output
// without one contributes nothing).
std::pair<std::vector<array>, std::vector<array>> vjp_impl(
    const VecFn& fun, const std::vector<array>& primals,
    const std::function<std::vector<array>(const std::vector<array>&)>& seed) {
  array::TracingScope tracing;
  std::vector<array> tracers;
  std::unordered_set<std::uintptr_t> cut;
  for (auto& p : primals) {
    tracers.push_back(make_tracer(p));
    cut.insert(tracers.back().id());
  }
  std::vector<array> outputs = fun(tracers);
  std::vector<array> seeds = seed(outputs);

  std::unordered_map<std::uintptr_t, array> cotan;
  auto accumulate = [&](const array& a, array c) {
    auto it = cotan.find(a.id());
    if (it == cotan.end()) {
      cotan.emplace(a.id(), std::move(c));
    } else {
      it->second = add(it->second, c);
    }
  };
  for (size_t i = 0; i < seeds.size() && i < outputs.size(); ++i) {
    if (outputs[i].is_tracer()) accumulate(outputs[i], astype(seeds[i], outputs[i].dtype()));
  }

  auto tape = trace_tape(outputs, cut);
  // Cotangents go only to the inputs that depend on the primals: another
  // tracer (an outer transform's, or a placeholder of compile) may stand for a
  // value without a derivative (quantized_matmul's packed weights).
  std::unordered_set<const void*> on_path;
  for (const array& a : tape) on_path.insert(a.node());
  auto needs_cotangent = [&](const array& in) {
    return cut.count(in.id()) > 0 || (in.has_primitive() && on_path.count(in.node()) > 0);
  };
  for (auto it = tape.rbegin(); it != tape.rend(); ++it) {
    const array& a = *it;
    auto outs = node_outputs(a);
    std::vector<array> cots;
    bool any = false;
    for (auto& o : outs) {
      auto c = cotan.find(o.id());
      if (c != cotan.end()) {
        cots.push_back(c->second);
        any = true;
        cotan.erase(c);
      } else {
        cots.push_back(zeros_like(o));
      }
    }
    if (!any) continue;
    const auto& inputs = a.inputs();
    std::vector<int> argnums;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (needs_cotangent(inputs[i])) argnums.push_back(static_cast<int>(i));
    }
    if (argnums.empty()) continue;
    auto& p = a.primitive();
    auto vjps = p.vjp(inputs, cots, argnums, outs);
    if (vjps.size() != argnums.size()) {
      throw std::logic_error(std::string("[vjp] the vjp rule of ") + p.name() +
                             " returned the wrong number of cotangents (bug)");
    }
    for (size_t k = 0; k < argnums.size(); ++k) accumulate(inputs[argnums[k]], vjps[k]);
  }

  std::vector<array> grads;
  for (size_t i = 0; i < primals.size(); ++i) {
    auto c = cotan.find(tracers[i].id());
    if (c == cotan.end()) {
      grads.push_back(zeros_like(primals[i]));
    } else {
      array g = c->second;
      if (g.dtype() != primals[i].dtype()) g = astype(g, primals[i].dtype());
      grads.push_back(g);
    }
  }
  return {outputs, grads};
}

}  // namespace

std::pair<std::vector<array>, std::vector<array>> vjp(const VecFn& fun,
                                                      const std::vector<array>& primals,
                                                      const std::vector<array>& cotangents) {
  return vjp_impl(fun, primals, [&](const std::vector<array>& outputs) {
    check_same_shapes("vjp", "cotangents", outputs, cotangents);
    return cotangents;
  });
}

std::pair<array, array> vjp(const std::function<array(const array&)>& fun, const array& primal,
                            const array& cotangent) {
  auto [outs, vjps] = vjp([&](const std::vector<array>& x) { return std::vector{fun(x[0])}; },
                          {primal}, {cotangent});
  return {outs[0], vjps[0]};
}

std::pair<std::vector<array>, std::vector<array>> jvp(const VecFn& fun,
                                                      const std::vector<array>& primals,
                                                      const std::vector<array>& tangents) {
  check_same_shapes("jvp", "tangents", primals, tangents);
  array::TracingScope tracing;
  std::vector<array> tracers;
  std::unordered_set<std::uintptr_t> cut;
  std::unordered_map<std::uintptr_t, array> tan;
  for (size_t i = 0; i < primals.size(); ++i) {
    tracers.push_back(make_tracer(primals[i]));
    cut.insert(tracers.back().id());
    tan.emplace(tracers.back().id(), astype(tangents[i], primals[i].dtype()));
  }
  std::vector<array> outputs = fun(tracers);
  for (auto& a : trace_tape(outputs, cut)) {
    const auto& inputs = a.inputs();
    std::vector<int> argnums;
    std::vector<array> tangents_in;
    for (size_t i = 0; i < inputs.size(); ++i) {
      auto t = tan.find(inputs[i].id());
      if (t != tan.end()) {
        argnums.push_back(static_cast<int>(i));
        tangents_in.push_back(t->second);
      }
    }
    if (argnums.empty()) continue;
    auto& p = a.primitive();
    auto outs = node_outputs(a);
    auto jvps = p.jvp(inputs, tangents_in, argnums);
    if (jvps.size() != outs.size()) {
      throw std::logic_error(std::string("[jvp] the jvp rule of ") + p.name() +
                             " returned the wrong number of tangents (bug)");
    }
    for (size_t k = 0; k < outs.size(); ++k) tan.emplace(outs[k].id(), jvps[k]);
  }
  std::vector<array> out_tangents;
  for (auto& o : outputs) {
    auto t = tan.find(o.id());
    out_tangents.push_back(t == tan.end() ? zeros_like(o) : t->second);
  }
  return {outputs, out_tangents};
}

std::pair<array, array> jvp(const std::function<array(const array&)>& fun, const array& primal,
                            const array& tangent) {
  auto [outs, jvps] = jvp([&](const std::vector<array>& x) { return std::vector{fun(x[0])}; },
                          {primal}, {tangent});
  return {outs[0], jvps[0]};
}

ValueAndGradFn value_and_grad(const VecFn& fun, const std::vector<int>& argnums) {
  if (argnums.empty()) {
    throw std::invalid_argument("[value_and_grad] argnums is empty: nothing to differentiate");
  }
  std::vector<int> sorted = argnums;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || (i > 0 && sorted[i] == sorted[i - 1])) {
      std::ostringstream msg;
      msg << "[value_and_grad] argnums must be distinct and non-negative, got " << sorted[i];
      throw std::invalid_argument(msg.str());
    }
  }
  return [fun, sorted](const std::vector<array>& inputs) {
    if (sorted.back() >= static_cast<int>(inputs.size())) {
      std::ostringstream msg;
      msg << "[value_and_grad] argnum " << sorted.back() << " is out of range for "
          << inputs.size() << " arguments";
      throw std::invalid_argument(msg.str());
    }
    std::vector<array> primals;
    for (int i : sorted) primals.push_back(inputs[i]);
    auto inner = [&](const std::vector<array>& ps) {
      std::vector<array> args = inputs;
      for (size_t k = 0; k < sorted.size(); ++k) args[sorted[k]] = ps[k];
      auto outs = fun(args);
      if (outs.empty()) {
        throw std::invalid_argument("[value_and_grad] the function returned no output");
      }
      if (outs[0].ndim() != 0) {
        throw std::invalid_argument(
            "[value_and_grad] the function's first output must be a scalar (shape ()), got "
            "shape " +
            shape_str(outs[0].shape()));
      }
      for (size_t i = 1; i < outs.size(); ++i) outs[i] = stop_gradient(outs[i]);
      return outs;
    };
    return vjp_impl(inner, primals, [](const std::vector<array>& outs) {
      return std::vector<array>{ones_like(outs[0])};
    });
  };
}

ValueAndGradFn value_and_grad(const VecFn& fun, int argnum) {
  return value_and_grad(fun, std::vector<int>{argnum});
}

std::function<std::pair<array, array>(const array&)> value_and_grad(
    const std::function<array(const array&)>& fun) {
  auto vg = value_and_grad([fun](const std::vector<array>& x) { return std::vector{fun(x[0])}; },
                           0);
  return [vg](const array& x) {
    auto [v, g] = vg({x});
    return std::make_pair(v[0], g[0]);
  };
}

SimpleValueAndGradFn value_and_grad(const std::function<array(const std::vector<array>&)>& fun,
                                    const std::vector<int>& argnums) {
  auto vg = value_and_grad(
      [fun](const std::vector<array>& x) { return std::vector<array>{fun(x)}; }, argnums);
  return [vg](const std::vector<array>& x) {
    auto [v, g] = vg(x);
    return std::make_pair(v[0], g);
  };
}

SimpleValueAndGradFn value_and_grad(const std::function<array(const std::vector<array>&)>& fun,
                                    int argnum) {
  return value_and_grad(fun, std::vector<int>{argnum});
}

VecFn grad(const std::function<array(const std::vector<array>&)>& fun,
           const std::vector<int>& argnums) {
  auto vg = value_and_grad(fun, argnums);
  return [vg](const std::vector<array>& x) { return vg(x).second; };
}

VecFn grad(const std::function<array(const std::vector<array>&)>& fun, int argnum) {
  return grad(fun, std::vector<int>{argnum});
}

std::function<array(const array&)> grad(const std::function<array(const array&)>& fun) {
  auto vg = value_and_grad(fun);
  return [vg](const array& x) { return vg(x).second; };
}

namespace {

// The mapped axis of each of `count` inputs or outputs (`what`): axes, or 0
// for every one when axes is empty.
std::vector<int> mapped_axes(const std::vector<int>& axes, size_t count, const char* axes_name,
                             const char* what) {
  if (axes.empty()) return std::vector<int>(count, 0);
  if (axes.size() != count) {
    std::ostringstream msg;
    msg << "[vmap] " << axes.size() << " " << axes_name << " for " << count << " " << what;
    throw std::invalid_argument(msg.str());
  }
  return axes;
}

}  // namespace

// Note [vmap]
// The function runs once on unbatched tracers (element 0 of each mapped
// input), which records its graph with the shapes it expects. That graph is
// then replayed from the tracers to the outputs: every node that depends on a
// mapped input is rebuilt by its primitive's vmap rule on the batched arrays,
// which also says where the batch axis went; nodes that do not are kept.
VecFn vmap(const VecFn& fun, const std::vector<int>& in_axes_arg,
           const std::vector<int>& out_axes_arg) {
  return [=](const std::vector<array>& inputs) {
    std::vector<int> in_axes = mapped_axes(in_axes_arg, inputs.size(), "in_axes", "inputs");
    int n = -1;
    std::vector<array> traced;
    std::unordered_set<std::uintptr_t> cut;
    std::unordered_map<std::uintptr_t, std::pair<array, int>> batched;
    for (size_t i = 0; i < inputs.size(); ++i) {
      int ax = in_axes[i];
      if (ax < 0) {
        traced.push_back(inputs[i]);
        continue;
      }
      const int nd = static_cast<int>(inputs[i].ndim());
      if (ax >= nd) {
        std::ostringstream msg;
        msg << "[vmap] in_axes " << ax << " is out of range for input " << i << " of shape "
            << shape_str(inputs[i].shape());
        throw std::out_of_range(msg.str());
      }
      int size = inputs[i].shape(ax);
      if (n >= 0 && size != n) {
        std::ostringstream msg;
        msg << "[vmap] mapped axes have different sizes: " << n << " and " << size;
        throw std::invalid_argument(msg.str());
      }
      n = size;
      if (n == 0) throw std::invalid_argument("[vmap] cannot map over an axis of size 0");
      Shape row = inputs[i].shape();
      row.erase(row.begin() + ax);
      traced.push_back(detail::placeholder(row, inputs[i].dtype(), "vmap"));
      cut.insert(traced.back().id());
      batched.emplace(traced.back().id(), std::make_pair(inputs[i], ax));
    }
    if (n < 0) throw std::invalid_argument("[vmap] no input is mapped (every in_axes is -1)");
    array::TracingScope tracing;

    std::vector<array> outputs = fun(traced);
    for (auto& a : trace_tape(outputs, cut)) {
      const auto& ins = a.inputs();
      std::vector<array> vin;
      std::vector<int> vax;
      bool any = false;
      for (auto& in : ins) {
        auto b = batched.find(in.id());
        if (b != batched.end()) {
          vin.push_back(b->second.first);
          vax.push_back(b->second.second);
          any = true;
        } else {
          vin.push_back(in);
          vax.push_back(-1);
        }
      }
      if (!any) continue;
      auto outs = node_outputs(a);
      auto [vouts, vaxes] = a.primitive().vmap(vin, vax);
      if (vouts.size() != outs.size() || vaxes.size() != outs.size()) {
        throw std::logic_error(std::string("[vmap] the vmap rule of ") + a.primitive().name() +
                               " returned the wrong number of outputs (bug)");
      }
      for (size_t k = 0; k < outs.size(); ++k) {
        batched.emplace(outs[k].id(), std::make_pair(vouts[k], vaxes[k]));
      }
    }

    std::vector<int> out_axes = mapped_axes(out_axes_arg, outputs.size(), "out_axes", "outputs");
    std::vector<array> results;
    for (size_t o = 0; o < outputs.size(); ++o) {
      auto b = batched.find(outputs[o].id());
      int want = out_axes[o];
      if (b == batched.end() || b->second.second < 0) {
        // Not mapped: the same value for every batch element.
        array v = b == batched.end() ? outputs[o] : b->second.first;
        if (want < 0) {
          results.push_back(v);
          continue;
        }
        Shape shape = v.shape();
        if (want > static_cast<int>(shape.size())) {
          throw std::out_of_range("[vmap] out_axes " + std::to_string(want) +
                                      " is out of range for output " + std::to_string(o));
        }
        shape.insert(shape.begin() + want, n);
        results.push_back(broadcast_to(expand_dims(v, want), shape));
        continue;
      }
      auto [v, ax] = b->second;
      if (want < 0) {
        throw std::invalid_argument("[vmap] output " + std::to_string(o) +
                                    " depends on a mapped input but its out_axes is -1");
      }
      if (want >= static_cast<int>(v.ndim())) {
        throw std::out_of_range("[vmap] out_axes " + std::to_string(want) +
                                    " is out of range for output " + std::to_string(o));
      }
      results.push_back(ax == want ? v : moveaxis(v, ax, want));
    }
    return results;
  };
}

std::function<array(const array&)> vmap(const std::function<array(const array&)>& fun,
                                        int in_axis, int out_axis) {
  auto f = vmap([fun](const std::vector<array>& x) { return std::vector{fun(x[0])}; }, {in_axis},
                {out_axis});
  return [f](const array& x) { return f({x})[0]; };
}

std::function<array(const array&, const array&)> vmap(
    const std::function<array(const array&, const array&)>& fun, int in_axis_a, int in_axis_b,
    int out_axis) {
  auto f = vmap([fun](const std::vector<array>& x) { return std::vector{fun(x[0], x[1])}; },
                {in_axis_a, in_axis_b}, {out_axis});
  return [f](const array& a, const array& b) { return f({a, b})[0]; };
}

namespace {

// Note [Custom transforms]
// custom_function(fun, ...)(x) computes y = fun(x), then returns new arrays
// from a CustomTransforms node whose inputs are x and y and whose outputs take
// y's buffers. The transforms see that node, not fun's graph, and call the
// caller's rules; a missing rule falls back to the transform of fun.
class CustomTransforms : public Primitive {
 public:
  CustomTransforms(Stream s, int num_inputs, std::vector<Shape> out_shapes, VecFn fun,
                   std::optional<CustomVjp> vjp_fn, std::optional<CustomJvp> jvp_fn,
                   std::optional<CustomVmap> vmap_fn)
      : Primitive(s), num_inputs_(num_inputs), out_shapes_(std::move(out_shapes)),
        fun_(std::move(fun)), vjp_(std::move(vjp_fn)), jvp_(std::move(jvp_fn)),
        vmap_(std::move(vmap_fn)) {}

  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override {
    for (size_t i = 0; i < outputs.size(); ++i) outputs[i].copy_shared_buffer(inputs[num_inputs_ + i]);
  }
  void eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) override {
    eval_cpu(inputs, outputs);
  }

  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override {
    std::vector<array> x(primals.begin(), primals.begin() + num_inputs_);
    std::vector<array> all;
    if (vjp_) {
      all = (*vjp_)(x, cotangents, outputs);
    } else {
      all = tessera::vjp(fun_, x, cotangents).second;
    }
    if (all.size() != x.size()) {
      throw std::invalid_argument("[custom_function] the vjp returned " +
                                  std::to_string(all.size()) + " cotangents for " +
                                  std::to_string(x.size()) + " primals");
    }
    for (size_t i = 0; i < x.size(); ++i) check_shape("vjp", "cotangent", i, all[i], x[i].shape());
    std::vector<array> out;
    for (int i : argnums) out.push_back(i < num_inputs_ ? all[i] : zeros_like(primals[i]));
    return out;
  }

  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override {
    std::vector<array> x(primals.begin(), primals.begin() + num_inputs_);
    std::vector<int> nums;
    std::vector<array> tans;
    for (size_t k = 0; k < argnums.size(); ++k) {
      if (argnums[k] < num_inputs_) {
        nums.push_back(argnums[k]);
        tans.push_back(tangents[k]);
      }
    }
    if (jvp_) {
      auto out = (*jvp_)(x, tans, nums);
      if (out.size() != out_shapes_.size()) {
        throw std::invalid_argument("[custom_function] the jvp returned " +
                                    std::to_string(out.size()) + " tangents for " +
                                    std::to_string(out_shapes_.size()) + " outputs");
      }
      for (size_t i = 0; i < out.size(); ++i) check_shape("jvp", "tangent", i, out[i], out_shapes_[i]);
      return out;
    }
    std::vector<array> full;
    for (auto& p : x) full.push_back(zeros_like(p));
    for (size_t k = 0; k < nums.size(); ++k) full[nums[k]] = tans[k];
    return tessera::jvp(fun_, x, full).second;
  }

  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override {
    std::vector<array> x(inputs.begin(), inputs.begin() + num_inputs_);
    std::vector<int> ax(axes.begin(), axes.begin() + num_inputs_);
    if (vmap_) return (*vmap_)(x, ax);
    auto outs = tessera::vmap(fun_, ax)(x);
    return {outs, std::vector<int>(outs.size(), 0)};
  }

  TESSERA_PRIMITIVE_NAME(CustomTransforms)

 private:
  static void check_shape(const char* rule, const char* what, size_t i, const array& got,
                          const Shape& want) {
    if (got.shape() != want) {
      throw std::invalid_argument(std::string("[custom_function] the ") + rule + " returned a " +
                                  what + " of shape " + shape_str(got.shape()) + " at position " +
                                  std::to_string(i) + " where " + shape_str(want) +
                                  " was expected");
    }
  }

  int num_inputs_;
  std::vector<Shape> out_shapes_;
  VecFn fun_;
  std::optional<CustomVjp> vjp_;
  std::optional<CustomJvp> jvp_;
  std::optional<CustomVmap> vmap_;
};

}  // namespace

VecFn custom_function(VecFn fun, std::optional<CustomVjp> fun_vjp,
                      std::optional<CustomJvp> fun_jvp, std::optional<CustomVmap> fun_vmap) {
  return [=](const std::vector<array>& inputs) {
    // fun's own graph is not differentiated: its outputs enter the node as
    // constants.
    std::vector<array> detached;
    for (auto& in : inputs) detached.push_back(stop_gradient(in));
    std::vector<array> outs = fun(detached);
    auto [shapes, dtypes] = shapes_and_dtypes(outs);
    std::vector<array> all = inputs;
    all.insert(all.end(), outs.begin(), outs.end());
    Stream s = default_stream(default_device());
    auto primitive = std::make_shared<CustomTransforms>(s, static_cast<int>(inputs.size()), shapes,
                                                        fun, fun_vjp, fun_jvp, fun_vmap);
    return array::make_arrays(std::move(shapes), dtypes, primitive, all);
  };
}

VecFn custom_vjp(VecFn fun, CustomVjp fun_vjp) {
  return custom_function(std::move(fun), std::move(fun_vjp));
}

VecFn checkpoint(VecFn fun) {
  CustomVjp recompute = [fun](const std::vector<array>& primals,
                              const std::vector<array>& cotangents,
                              const std::vector<array>&) {
    return tessera::vjp(fun, primals, cotangents).second;
  };
  return custom_function(fun, recompute);
}

}  // namespace tessera
