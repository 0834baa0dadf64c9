// The function transforms over flat lists of arrays. tessera/_transforms.py
// builds the reference's interface (pytrees, argnums, argnames) on top.
#include <nanobind/stl/function.h>

#include "convert.h"

namespace tessera::python {

namespace {

std::vector<array> as_arrays(nb::handle r, const char* op) {
  if (nb::isinstance<array>(r)) return {nb::cast<array>(r)};
  std::vector<array> out;
  if (!PyList_Check(r.ptr()) && !PyTuple_Check(r.ptr())) {
    throw std::invalid_argument(std::string("[") + op +
                                "] the function must return an array or a list of arrays");
  }
  for (nb::handle e : r) {
    if (!nb::isinstance<array>(e)) {
      throw std::invalid_argument(std::string("[") + op + "] the function returned a " +
                                  nb::type_name(e.type()).c_str() + " where an array was expected");
    }
    out.push_back(nb::cast<array>(e));
  }
  return out;
}

VecFn wrap(nb::object fn, const char* op) {
  auto holder = std::make_shared<PyFn>(std::move(fn));
  return [holder, op](const std::vector<array>& xs) {
    nb::gil_scoped_acquire gil;
    nb::list args;
    for (auto& x : xs) args.append(x);
    return as_arrays(holder->f(args), op);
  };
}

nb::list to_list(const std::vector<array>& v) {
  nb::list l;
  for (auto& a : v) l.append(a);
  return l;
}

}  // namespace

void init_transforms(nb::module_& m) {
  def_named(m, "_vjp_flat", [](nb::object fun, std::vector<array> primals, std::vector<array> cotangents) {
    auto [outs, vjps] = vjp(wrap(fun, "vjp"), primals, cotangents);
    return nb::make_tuple(to_list(outs), to_list(vjps));
  }, "fun"_a, "primals"_a, "cotangents"_a);
  def_named(m, "_value_and_grad_flat", [](nb::object fun, std::vector<array> inputs) {
    std::vector<int> argnums(inputs.size());
    for (size_t i = 0; i < argnums.size(); ++i) argnums[i] = static_cast<int>(i);
    auto [outs, grads] = value_and_grad(wrap(fun, "value_and_grad"), argnums)(inputs);
    return nb::make_tuple(to_list(outs), to_list(grads));
  }, "fun"_a, "inputs"_a);
  def_named(m, "_jvp_flat", [](nb::object fun, std::vector<array> primals, std::vector<array> tangents) {
    auto [outs, jvps] = jvp(wrap(fun, "jvp"), primals, tangents);
    return nb::make_tuple(to_list(outs), to_list(jvps));
  }, "fun"_a, "primals"_a, "tangents"_a);
  def_named(m, "_vmap_flat", [](nb::object fun, std::vector<array> inputs, std::vector<int> in_axes) {
    return to_list(vmap(wrap(fun, "vmap"), in_axes)(inputs));
  }, "fun"_a, "inputs"_a, "in_axes"_a);
  // A compiled function of flat lists (tessera/_transforms.py builds compile's
  // trees, implicit inputs and outputs on top).
  def_named(m, "_compile_flat", [](nb::object fun, bool shapeless) {
    VecFn compiled = compile(wrap(std::move(fun), "compile"), shapeless);
    return nb::cpp_function(
        [compiled](std::vector<array> inputs) { return to_list(compiled(inputs)); });
  }, "fun"_a, "shapeless"_a = false);
  def_named(m, "_compile_enabled", [] { return compile_mode() != CompileMode::disabled; });
  m.def("_graph_primitives", [](std::vector<array> outputs) {
    return tessera::detail::graph_primitives(outputs);
  }, "outputs"_a, "The primitives of the unevaluated graph behind outputs, inputs first.");
  def_named(m, "disable_compile", &disable_compile,
        "Makes compile a no-op: compiled functions call the function itself.");
  def_named(m, "enable_compile", &enable_compile,
        "Turns compile back on (also over the MLX_DISABLE_COMPILE environment variable).");
  def_named(m, "depends", [](nb::handle inputs, nb::handle dependencies) {
    auto as_list = [](nb::handle h, const char* what) {
      if (nb::isinstance<array>(h)) return std::vector<array>{nb::cast<array>(h)};
      try {
        return nb::cast<std::vector<array>>(h);
      } catch (const nb::cast_error&) {
        throw nb::type_error(
            (std::string("[depends] ") + what + " must be an array or a sequence of arrays").c_str());
      }
    };
    bool single = nb::isinstance<array>(inputs);
    auto out = depends(as_list(inputs, "inputs"), as_list(dependencies, "dependencies"));
    return single ? nb::object(nb::cast(out[0])) : nb::object(to_list(out));
  }, "inputs"_a, "dependencies"_a,
     "Arrays equal to inputs, computed after every array of dependencies.");
  def_named(m, "_checkpoint_flat", [](nb::object fun, std::vector<array> inputs) {
    return to_list(checkpoint(wrap(fun, "checkpoint"))(inputs));
  }, "fun"_a, "inputs"_a);
  def_named(m, "_custom_function_flat", [](nb::object fun, nb::object fvjp, nb::object fjvp,
                                    nb::object fvmap, std::vector<array> inputs) {
    std::optional<CustomVjp> cvjp;
    std::optional<CustomJvp> cjvp;
    std::optional<CustomVmap> cvmap;
    if (!fvjp.is_none()) {
      auto h = std::make_shared<PyFn>(fvjp);
      cvjp = [h](const std::vector<array>& p, const std::vector<array>& c, const std::vector<array>& o) {
        nb::gil_scoped_acquire gil;
        return as_arrays(h->f(to_list(p), to_list(c), to_list(o)), "custom_function.vjp");
      };
    }
    if (!fjvp.is_none()) {
      auto h = std::make_shared<PyFn>(fjvp);
      cjvp = [h](const std::vector<array>& p, const std::vector<array>& t, const std::vector<int>& argnums) {
        nb::gil_scoped_acquire gil;
        return as_arrays(h->f(to_list(p), to_list(t), argnums), "custom_function.jvp");
      };
    }
    if (!fvmap.is_none()) {
      auto h = std::make_shared<PyFn>(fvmap);
      cvmap = [h](const std::vector<array>& in, const std::vector<int>& axes) {
        nb::gil_scoped_acquire gil;
        nb::object r = h->f(to_list(in), axes);
        auto pair = nb::cast<nb::tuple>(r);
        return std::make_pair(as_arrays(pair[0], "custom_function.vmap"),
                              nb::cast<std::vector<int>>(pair[1]));
      };
    }
    return to_list(custom_function(wrap(fun, "custom_function"), cvjp, cjvp, cvmap)(inputs));
  }, "fun"_a, "vjp"_a.none(), "jvp"_a.none(), "vmap"_a.none(), "inputs"_a);
}

}  // namespace tessera::python
