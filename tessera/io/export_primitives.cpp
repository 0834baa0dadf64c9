// The codec of every primitive for export_function and import_function.
//
// Note [Exported primitives]
// Every primitive names its parameters with TESSERA_PARAMETERS (core/primitive.h),
// whose parameters() returns a tuple of references to them, and is constructed
// from (Stream, parameters...). So one template serves almost all of them:
// codec<T>() writes the tuple element by element as ExportValues (to_value, one
// overload per parameter type; a type it lacks fails to compile) and makes T
// again from them (make<T>, which static_asserts that T is constructible so).
// The table below lists each primitive once, by name(); the elementwise ones
// come from the rows of ops/elementwise_table.h, so a new row is exported
// with no edit here. Written by hand:
//   - the fast primitives (RMSNorm, LayerNorm, RoPE, ScaledDotProductAttention
//     and their VJPs) hold their fallback, a std::function, besides their
//     parameters(): their nodes are made again by their public op (a VJP by
//     tessera::vjp of the op), which builds the fallback anew;
//   - Depends, made by the public depends().
// A Compiled node is exported as the primitives it fused and a
// CustomTransforms node (custom_function, checkpoint) as the function's own
// graph (io/export.cpp); a primitive missing here cannot be exported, and
// export_function says so by name.
//
// Each codec also says how its output shapes follow from its inputs' (its
// rule, for shapeless imports: Note [Shapeless imports] in io/export.cpp).
// Convolution, FFT and RandomBits answer through their own output_shapes();
// the others' rules are written here, with the trace's shapes at hand (a
// Slice also moves its region's end on the axes it took whole). A primitive
// without a rule (Pad, SliceUpdate, the factorizations) cannot infer its
// shapes, and a shapeless call that changes its inputs' shapes raises.
#include "tessera/io/export_primitives.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "tessera/ops/depends.h"
#include "tessera/ops/elementwise_table.h"
#include "tessera/ops/fast.h"
#include "tessera/ops/primitives/binary.h"
#include "tessera/ops/primitives/convolution.h"
#include "tessera/ops/primitives/copy.h"
#include "tessera/ops/primitives/creation.h"
#include "tessera/ops/primitives/fast.h"
#include "tessera/ops/primitives/fft.h"
#include "tessera/ops/primitives/indexing.h"
#include "tessera/ops/primitives/linalg.h"
#include "tessera/ops/primitives/matmul.h"
#include "tessera/ops/primitives/quantized.h"
#include "tessera/ops/primitives/random.h"
#include "tessera/ops/primitives/reduce.h"
#include "tessera/ops/primitives/scan.h"
#include "tessera/ops/primitives/shape.h"
#include "tessera/ops/primitives/sort.h"
#include "tessera/ops/primitives/unary.h"
#include "tessera/ops/utils.h"
#include "tessera/transforms/transforms.h"

namespace tessera::io::detail {

namespace {

template <typename>
inline constexpr bool dependent_false = false;
template <typename T>
inline constexpr bool is_optional = false;
template <typename T>
inline constexpr bool is_optional<std::optional<T>> = true;
template <typename T>
inline constexpr bool is_vector = false;
template <typename T>
inline constexpr bool is_vector<std::vector<T>> = true;

[[noreturn]] void corrupt(const char* name, const std::string& what) {
  throw std::runtime_error(std::string("[import_function] the parameters of ") + name +
                           " are corrupt: " + what);
}

[[noreturn]] void cannot_infer(const char* name, const std::string& why = "") {
  throw std::invalid_argument(
      std::string("[import_function::call] ") + name +
      " cannot infer its output shapes from inputs of other shapes than the trace's" +
      (why.empty() ? "" : " (" + why + ")"));
}

// ---- parameters <-> ExportValue ------------------------------------------

template <typename A>
ExportValue value_of(A a) {
  ExportValue v;
  v.value.emplace<A>(std::move(a));
  return v;
}

template <typename T>
ExportValue to_value(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return value_of<bool>(v);
  } else if constexpr (std::is_enum_v<T> || std::is_integral_v<T>) {
    return value_of<int64_t>(static_cast<int64_t>(v));
  } else if constexpr (std::is_floating_point_v<T>) {
    return value_of<double>(static_cast<double>(v));
  } else if constexpr (std::is_same_v<T, Dtype> || std::is_same_v<T, std::string>) {
    return value_of<T>(v);
  } else if constexpr (is_optional<T>) {
    return v ? to_value(*v) : ExportValue{};
  } else if constexpr (is_vector<T>) {
    std::vector<ExportValue> list;
    list.reserve(v.size());
    for (const auto& e : v) list.push_back(to_value(e));
    return value_of(std::move(list));
  } else {
    static_assert(dependent_false<T>, "a parameter type that export cannot write: add it here");
  }
}

template <typename A>
const A& get(const ExportValue& v, const char* name, const char* kind) {
  const A* p = std::get_if<A>(&v.value);
  if (!p) corrupt(name, std::string("expected ") + kind);
  return *p;
}

template <typename T>
T from_value(const ExportValue& v, const char* name) {
  if constexpr (std::is_same_v<T, bool>) {
    return get<bool>(v, name, "a bool");
  } else if constexpr (std::is_enum_v<T> || std::is_integral_v<T>) {
    return static_cast<T>(get<int64_t>(v, name, "an integer"));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(get<double>(v, name, "a number"));
  } else if constexpr (std::is_same_v<T, Dtype>) {
    return get<Dtype>(v, name, "a dtype");
  } else if constexpr (std::is_same_v<T, std::string>) {
    return get<std::string>(v, name, "a string");
  } else if constexpr (is_optional<T>) {
    if (std::holds_alternative<std::monostate>(v.value)) return std::nullopt;
    return from_value<typename T::value_type>(v, name);
  } else if constexpr (is_vector<T>) {
    T out;
    for (const auto& e : get<std::vector<ExportValue>>(v, name, "a list")) {
      out.push_back(from_value<typename T::value_type>(e, name));
    }
    return out;
  } else {
    static_assert(dependent_false<T>, "a parameter type that export cannot read: add it here");
  }
}

// The parameter types of T, without references: parameters() ties its members.
template <typename Tuple>
struct Decayed;
template <typename... A>
struct Decayed<std::tuple<A...>> {
  using type = std::tuple<std::remove_cvref_t<A>...>;
};
template <typename T>
using Parameters = typename Decayed<decltype(std::declval<const T&>().parameters())>::type;

template <typename T>
std::vector<ExportValue> parameters_of(const Primitive& p) {
  std::vector<ExportValue> out;
  std::apply([&](const auto&... v) { (out.push_back(to_value(v)), ...); },
             dynamic_cast<const T&>(p).parameters());
  return out;
}

// The parameters read as a tuple of the given types.
template <typename Tuple, size_t... I>
Tuple decode(const NodeBuild& b, std::index_sequence<I...>) {
  if (b.params.size() != sizeof...(I)) {
    corrupt(b.name, std::to_string(b.params.size()) + " where " + std::to_string(sizeof...(I)) +
                        " were expected");
  }
  return Tuple{from_value<std::tuple_element_t<I, Tuple>>(b.params[I], b.name)...};
}
template <typename... A>
std::tuple<A...> decode(const NodeBuild& b) {
  return decode<std::tuple<A...>>(b, std::index_sequence_for<A...>{});
}

template <typename T, typename Tuple>
inline constexpr bool constructible = false;
template <typename T, typename... A>
inline constexpr bool constructible<T, std::tuple<A...>> = std::is_constructible_v<T, Stream, A...>;

template <typename T>
std::shared_ptr<T> make(const NodeBuild& b) {
  using P = Parameters<T>;
  static_assert(constructible<T, P>,
                "the primitive is not constructible from (Stream, parameters...): "
                "write its codec by hand");
  return std::apply([&](auto&&... v) { return std::make_shared<T>(b.stream, std::move(v)...); },
                    decode<P>(b, std::make_index_sequence<std::tuple_size_v<P>>{}));
}

// ---- shape rules ------------------------------------------------------------

// The output shapes of p over b.inputs (whose shapes differ from the trace's).
using ShapeRule = std::vector<Shape> (*)(Primitive& p, const NodeBuild& b);

template <typename T>
const T& as(const Primitive& p) {
  return dynamic_cast<const T&>(p);
}

std::vector<Shape> like_first(Primitive&, const NodeBuild& b) {
  return std::vector<Shape>(b.shapes.size(), b.inputs.at(0).shape());
}

std::vector<Shape> broadcast_all(Primitive& p, const NodeBuild& b) {
  std::vector<Shape> shapes;
  for (const auto& in : b.inputs) shapes.push_back(in.shape());
  return std::vector<Shape>(b.shapes.size(), broadcast_shapes(shapes, p.name()));
}

std::vector<Shape> scalar(Primitive&, const NodeBuild&) { return {Shape{}}; }

std::vector<Shape> like_second(Primitive&, const NodeBuild& b) { return {b.inputs.at(1).shape()}; }

std::vector<Shape> own_rule(Primitive& p, const NodeBuild& b) { return p.output_shapes(b.inputs); }

// The shape of x reduced over axes (sorted, normalized).
Shape reduced(const Shape& x, const std::vector<int>& axes, bool keepdims) {
  Shape out;
  for (int i = 0; i < static_cast<int>(x.size()); ++i) {
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) {
      out.push_back(x[i]);
    } else if (keepdims) {
      out.push_back(1);
    }
  }
  return out;
}

template <typename T>
std::vector<Shape> axes_reduction(Primitive& p, const NodeBuild& b) {
  const auto params = as<T>(p).parameters();
  constexpr size_t axes_at = std::is_same_v<T, Reduce> ? 1 : 0;  // after Reduce's type
  const std::vector<int>& axes = std::get<axes_at>(params);
  const bool keepdims = std::get<axes_at + 1>(params);
  for (int ax : axes) {
    if (ax >= static_cast<int>(b.inputs[0].ndim())) cannot_infer(b.name, "axis out of range");
  }
  return {reduced(b.inputs[0].shape(), axes, keepdims)};
}

std::vector<Shape> arg_reduce(Primitive& p, const NodeBuild& b) {
  auto [type, axis, keepdims] = as<ArgReduce>(p).parameters();
  return {reduced(b.inputs[0].shape(), {axis}, keepdims)};
}

std::vector<Shape> trace_rule(Primitive& p, const NodeBuild& b) {
  auto [offset, axis1, axis2] = as<Trace>(p).parameters();
  return {reduced(b.inputs[0].shape(), {axis1, axis2}, false)};
}

// (..., M, K) @ (..., K, N): the batch shapes broadcast.
std::vector<Shape> matmul_rule(Primitive& p, const NodeBuild& b) {
  const Shape &x = b.inputs.at(0).shape(), &y = b.inputs.at(1).shape();
  if (x.size() < 2 || y.size() < 2) cannot_infer(b.name);
  Shape out =
      broadcast_shapes(Shape(x.begin(), x.end() - 2), Shape(y.begin(), y.end() - 2), p.name());
  out.insert(out.end(), {x[x.size() - 2], y.back()});
  return {out};
}

std::vector<Shape> transpose_rule(Primitive& p, const NodeBuild& b) {
  const auto& axes = std::get<0>(as<Transpose>(p).parameters());
  const Shape& x = b.inputs[0].shape();
  if (axes.size() != x.size()) cannot_infer(b.name);
  Shape out;
  for (int ax : axes) out.push_back(x[ax]);
  return {out};
}

std::vector<Shape> broadcast_rule(Primitive& p, const NodeBuild& b) {
  const Shape& target = std::get<0>(as<Broadcast>(p).parameters());
  const Shape& x = b.inputs[0].shape();
  bool fits = x.size() <= target.size();
  for (size_t i = 0; fits && i < x.size(); ++i) {
    ShapeElem d = x[x.size() - 1 - i];
    fits = d == 1 || d == target[target.size() - 1 - i];
  }
  if (!fits) {
    cannot_infer(b.name,
                 "the input " + shape_str(x) + " does not broadcast to " + shape_str(target));
  }
  return {target};
}

std::vector<Shape> concatenate_rule(Primitive& p, const NodeBuild& b) {
  int axis = std::get<0>(as<Concatenate>(p).parameters());
  Shape out = b.inputs.at(0).shape();
  if (axis < 0 || axis >= static_cast<int>(out.size())) cannot_infer(b.name);
  out[axis] = 0;
  for (const auto& in : b.inputs) {
    if (in.ndim() != out.size()) cannot_infer(b.name);
    out[axis] += in.shape(axis);
  }
  return {out};
}

// Reshape: the trace's input and output dimensions fall in runs of equal
// product (merged or split axes); a run whose input dimensions changed gives
// their new product to its one output dimension other than 1s (a merge, or
// axes of 1 added), and is ambiguous otherwise (a split).
std::vector<Shape> reshape_rule(Primitive&, const NodeBuild& b) {
  const Shape &was = b.traced_inputs.at(0), &made = b.shapes.at(0), &now = b.inputs[0].shape();
  if (was.size() != now.size()) cannot_infer(b.name);
  Shape out;
  size_t i = 0, j = 0;
  while (i < was.size() || j < made.size()) {
    size_t i0 = i, j0 = j;
    int64_t pi = i < was.size() ? was[i++] : 1;
    int64_t po = j < made.size() ? made[j++] : 1;
    while (pi != po) {
      if (pi < po && i < was.size()) {
        pi *= was[i++];
      } else if (po < pi && j < made.size()) {
        po *= made[j++];
      } else {
        cannot_infer(b.name);
      }
    }
    if (std::equal(was.begin() + i0, was.begin() + i, now.begin() + i0)) {
      out.insert(out.end(), made.begin() + j0, made.begin() + j);
      continue;
    }
    // The run's one output dimension other than 1s takes the new size.
    size_t sized = j0;
    if (j - j0 > 1) {
      auto ones = std::count(made.begin() + j0, made.begin() + j, 1);
      auto it =
          std::find_if(made.begin() + j0, made.begin() + j, [](ShapeElem d) { return d != 1; });
      if (pi == 0 || ones != static_cast<std::ptrdiff_t>(j - j0 - 1) || it == made.begin() + j) {
        cannot_infer(b.name, "it splits an axis whose size changed");
      }
      sized = static_cast<size_t>(it - made.begin());
    }
    int64_t n = 1;
    for (size_t k = i0; k < i; ++k) n *= now[k];
    for (size_t k = j0; k < j; ++k) out.push_back(k == sized ? static_cast<ShapeElem>(n) : made[k]);
  }
  return {out};
}

// Gather: the index shape, then the slices, which stay whole along the axes
// the trace took whole.
std::vector<Shape> gather_rule(Primitive& p, const NodeBuild& b) {
  auto [axes, slice_sizes] = as<Gather>(p).parameters();
  const Shape &was = b.traced_inputs.at(0), &now = b.inputs[0].shape();
  Shape out = b.inputs.size() > 1 ? b.inputs[1].shape() : Shape{};
  for (size_t ax = 0; ax < slice_sizes.size() && ax < now.size(); ++ax) {
    bool indexed = std::find(axes.begin(), axes.end(), static_cast<int>(ax)) != axes.end();
    out.push_back(!indexed && slice_sizes[ax] == was[ax] ? now[ax] : slice_sizes[ax]);
  }
  return {out};
}

std::vector<Shape> dequantize_rule(Primitive& p, const NodeBuild& b) {
  auto [group_size, bits] = as<Dequantize>(p).parameters();
  Shape out = b.inputs[0].shape();
  if (out.empty()) cannot_infer(b.name);
  out.back() = out.back() * 32 / bits;
  return {out};
}

// A 2-D weight that did not change: x (..., K) -> (..., N).
std::vector<Shape> quantized_matmul_rule(Primitive&, const NodeBuild& b) {
  for (size_t k = 1; k < b.inputs.size(); ++k) {
    if (b.inputs[k].shape() != b.traced_inputs[k] || b.inputs[k].ndim() != 2) cannot_infer(b.name);
  }
  Shape out = b.inputs[0].shape();
  out.back() = b.shapes[0].back();
  return {out};
}

// ---- codecs ---------------------------------------------------------------

// The outputs of primitive p over the inputs: one array for a UnaryPrimitive,
// make_arrays otherwise.
template <typename T>
std::vector<array> node(std::shared_ptr<T> p, std::vector<Shape> shapes, const NodeBuild& b) {
  if constexpr (std::is_base_of_v<UnaryPrimitive, T>) {
    if (shapes.size() != 1) {
      corrupt(b.name, "a primitive of one output with " + std::to_string(shapes.size()));
    }
    return {array(std::move(shapes[0]), b.dtypes[0], std::move(p), b.inputs)};
  } else {
    return array::make_arrays(std::move(shapes), b.dtypes, std::move(p), b.inputs);
  }
}

template <typename T, ShapeRule Rule>
std::vector<array> build(const NodeBuild& b) {
  std::shared_ptr<T> p = make<T>(b);
  if (!b.infer_shapes) return node(std::move(p), b.shapes, b);
  if constexpr (Rule == nullptr) {
    cannot_infer(b.name);
  } else {
    return node(p, Rule(*p, b), b);
  }
}

template <typename T, ShapeRule Rule = nullptr>
PrimitiveCodec codec(Operands operands = Operands::fixed) {
  return {&parameters_of<T>, &build<T, Rule>, operands};
}

// The parameters of a fast primitive (its parameters(): the norms' (eps,
// has_weight, has_bias), rope's (dims, traditional, base, scale), attention's
// (scale, mask, has_sinks)), one value each.
template <typename P>
std::vector<ExportValue> fast_parameters(const Primitive& p) {
  return std::apply([](const auto&... v) { return std::vector<ExportValue>{to_value(v)...}; },
                    dynamic_cast<const P&>(p).parameters());
}

void expect_inputs(const NodeBuild& b, size_t n) {
  if (b.inputs.size() != n) {
    corrupt(b.name, "the node has " + std::to_string(b.inputs.size()) + " inputs where " +
                        std::to_string(n) + " were expected");
  }
}

// The forward norm over {x, weight?, bias?}.
std::vector<array> norm(const NodeBuild& b, bool layer, const std::vector<array>& in) {
  auto [eps, has_weight, has_bias] = decode<float, bool, bool>(b);
  std::optional<array> weight, bias;
  size_t next = 1;
  if (has_weight) weight = in.at(next++);
  if (has_bias) bias = in.at(next++);
  return {layer ? fast::layer_norm(in[0], weight, bias, eps, b.stream)
                : fast::rms_norm(in[0], weight, eps, b.stream)};
}

size_t norm_primals(const NodeBuild& b) {
  auto [eps, has_weight, has_bias] = decode<float, bool, bool>(b);
  return 1 + has_weight + has_bias;
}

template <bool Layer>
std::vector<array> build_norm(const NodeBuild& b) {
  expect_inputs(b, norm_primals(b));
  return norm(b, Layer, b.inputs);
}

// The norm's vjp node over {primals..., cotangent}: the vjp of the op, which
// makes the fused node where a kernel covers the case.
template <bool Layer>
std::vector<array> build_norm_vjp(const NodeBuild& b) {
  const size_t n = norm_primals(b);
  expect_inputs(b, n + 1);
  std::vector<array> primals(b.inputs.begin(), b.inputs.begin() + n);
  auto fun = [&](const std::vector<array>& in) { return norm(b, Layer, in); };
  return vjp(fun, primals, {b.inputs[n]}).second;
}

std::vector<array> build_rope(const NodeBuild& b) {
  auto [dims, traditional, base, scale] = decode<int, bool, std::optional<float>, float>(b);
  if (b.inputs.size() != 2 && b.inputs.size() != 3) expect_inputs(b, 2);
  std::optional<array> freqs;
  if (b.inputs.size() == 3) freqs = b.inputs[2];
  return {fast::rope(b.inputs[0], dims, traditional, base, scale, b.inputs[1], freqs, b.stream)};
}

using Mask = fast::ScaledDotProductAttention::Mask;

// The attention op over {q, k, v, mask?, sinks?}.
array attention(const NodeBuild& b, const std::vector<array>& in) {
  auto [scale, mask, has_sinks] = decode<float, Mask, bool>(b);
  const char* mode = mask == Mask::causal ? "causal" : mask == Mask::array ? "array" : "";
  size_t next = 3;
  std::optional<array> mask_arr, sinks;
  if (mask == Mask::array) mask_arr = in.at(next++);
  if (has_sinks) sinks = in.at(next++);
  return fast::scaled_dot_product_attention(in[0], in[1], in[2], scale, mode, mask_arr, sinks,
                                            false, b.stream);
}

size_t attention_primals(const NodeBuild& b) {
  auto [scale, mask, has_sinks] = decode<float, Mask, bool>(b);
  return 3 + (mask == Mask::array) + has_sinks;
}

// Outputs {o, lse}. The op returns o alone, from the node or from the
// fallback's graph; when a later node reads lse (a vjp node), the node is
// made in every case (fast::PrimitiveScope) and both outputs taken from it.
std::vector<array> build_attention(const NodeBuild& b) {
  expect_inputs(b, attention_primals(b));
  if (b.used_outputs <= 1) return {attention(b, b.inputs)};
  fast::PrimitiveScope node_in_every_case;
  return attention(b, b.inputs).outputs();
}

// Inputs {q, k, v, mask?, sinks?, o, lse, d_o, d_lse}, outputs {dq, dk, dv}:
// the vjp of the op with respect to q, k and v for the cotangent d_o.
std::vector<array> build_attention_vjp(const NodeBuild& b) {
  const size_t n = attention_primals(b);
  if (b.inputs.size() != n + 3) expect_inputs(b, n + 4);  // d_lse is left out when zero
  std::vector<array> rest(b.inputs.begin() + 3, b.inputs.begin() + n);
  auto fun = [&](const std::vector<array>& qkv) {
    std::vector<array> in = qkv;
    in.insert(in.end(), rest.begin(), rest.end());
    return std::vector<array>{attention(b, in)};
  };
  std::vector<array> primals(b.inputs.begin(), b.inputs.begin() + 3);
  return vjp(fun, primals, {b.inputs[n + 2]}).second;
}

// Slice: an axis the trace took whole is taken whole again (the region
// follows the new size); an axis of which it took a part must keep its size.
std::vector<array> build_slice(const NodeBuild& b) {
  auto [start, stop, strides] = decode<Shape, Shape, Shape>(b);
  Shape shape = b.shapes.at(0);
  if (b.infer_shapes) {
    const Shape &was = b.traced_inputs.at(0), &now = b.inputs.at(0).shape();
    if (now.size() != was.size() || start.size() != now.size() || shape.size() != now.size()) {
      cannot_infer(b.name);
    }
    for (size_t ax = 0; ax < now.size(); ++ax) {
      if (now[ax] == was[ax]) continue;
      if (start[ax] != 0 || stop[ax] != was[ax] || strides[ax] != 1) {
        cannot_infer(b.name, "it takes part of an axis whose size changed");
      }
      stop[ax] = shape[ax] = now[ax];
    }
  }
  return node(
      std::make_shared<Slice>(b.stream, std::move(start), std::move(stop), std::move(strides)),
      {shape}, b);
}

// Depends over {inputs..., dependencies...}: as many outputs as inputs.
std::vector<array> build_depends(const NodeBuild& b) {
  decode<>(b);
  const size_t n = b.shapes.size();
  if (b.inputs.size() < n) expect_inputs(b, n);
  return depends(std::vector<array>(b.inputs.begin(), b.inputs.begin() + n),
                 std::vector<array>(b.inputs.begin() + n, b.inputs.end()));
}

std::vector<ExportValue> no_parameters(const Primitive&) { return {}; }

using Table = std::unordered_map<std::string_view, PrimitiveCodec>;

Table make_table() {
  constexpr auto elementwise = Operands::elementwise;
  Table t;
#define TESSERA_EXPORT_UNARY(NAME, FN, RULE) \
  t.emplace(#NAME, codec<NAME, &like_first>(elementwise));
#define TESSERA_EXPORT_BINARY(NAME, FN, RULE) \
  t.emplace(#NAME, codec<NAME, &broadcast_all>(elementwise));
  TESSERA_UNARY_OPS(TESSERA_EXPORT_UNARY)
  TESSERA_BINARY_OPS(TESSERA_EXPORT_BINARY)
#undef TESSERA_EXPORT_UNARY
#undef TESSERA_EXPORT_BINARY
  t.insert({
      // unary.h, binary.h
      {"StopGradient", codec<StopGradient, &like_first>(elementwise)},
      {"Round", codec<Round, &like_first>(elementwise)},
      {"NanToNum", codec<NanToNum, &like_first>(elementwise)},
      {"Select", codec<Select, &broadcast_all>(elementwise)},
      {"AllTrue", codec<AllTrue, &scalar>()},
      {"Equal", codec<Equal, &broadcast_all>(elementwise)},
      {"IsClose", codec<IsClose, &broadcast_all>(elementwise)},
      {"DivMod", codec<DivMod, &broadcast_all>(elementwise)},
      // copy.h
      {"AsType", codec<AsType, &like_first>(elementwise)},
      {"Copy", codec<Copy, &like_first>(elementwise)},
      {"Broadcast", codec<Broadcast, &broadcast_rule>()},
      {"Contiguous", codec<Contiguous, &like_first>()},
      // creation.h
      {"Arange", codec<Arange>()},
      {"Linspace", codec<Linspace>()},
      {"Band", codec<Band, &like_first>()},
      {"View", codec<View>()},
      {"AsStrided", codec<AsStrided>()},
      // shape.h
      {"Transpose", codec<Transpose, &transpose_rule>()},
      {"Slice", {&parameters_of<Slice>, &build_slice, Operands::fixed}},
      {"Reshape", codec<Reshape, &reshape_rule>()},
      {"DynamicSlice", codec<DynamicSlice>()},
      {"SliceUpdate", codec<SliceUpdate>()},
      {"DynamicSliceUpdate", codec<DynamicSliceUpdate>()},
      {"Concatenate", codec<Concatenate, &concatenate_rule>()},
      {"Pad", codec<Pad>()},
      {"Diagonal", codec<Diagonal>()},
      // indexing.h
      {"Gather", codec<Gather, &gather_rule>()},
      {"Scatter", codec<Scatter, &like_first>()},
      {"GatherAxis", codec<GatherAxis, &like_second>()},
      {"ScatterAxis", codec<ScatterAxis, &like_first>()},
      {"MaskedScatter", codec<MaskedScatter, &like_first>()},
      // reduce.h
      {"Reduce", codec<Reduce, &axes_reduction<Reduce>>()},
      {"ArgReduce", codec<ArgReduce, &arg_reduce>()},
      {"Variance", codec<Variance, &axes_reduction<Variance>>()},
      {"LogSumExp", codec<LogSumExp, &axes_reduction<LogSumExp>>()},
      {"Softmax", codec<Softmax, &like_first>()},
      {"Trace", codec<Trace, &trace_rule>()},
      // matmul.h
      {"Matmul", codec<Matmul, &matmul_rule>(Operands::matmul)},
      {"AddMM", codec<AddMM, &matmul_rule>(Operands::matmul)},
      // scan.h, sort.h (Sort's name() depends on its kind)
      {"Scan", codec<Scan, &like_first>()},
      {"Sort", codec<Sort, &like_first>()},
      {"ArgSort", codec<Sort, &like_first>()},
      {"Partition", codec<Sort, &like_first>()},
      {"ArgPartition", codec<Sort, &like_first>()},
      {"SearchSorted", codec<SearchSorted, &like_second>()},
      {"PermuteAxis", codec<PermuteAxis, &like_first>()},
      // fft.h, random.h, convolution.h: their own output_shapes
      {"FFT", codec<FFT, &own_rule>()},
      {"RandomBits", codec<RandomBits, &own_rule>()},
      {"Convolution", codec<Convolution, &own_rule>()},
      // linalg.h
      {"LUF", codec<LUF>()},
      {"Solve", codec<Solve, &like_second>()},
      {"Inverse", codec<Inverse, &like_first>()},
      {"Cholesky", codec<Cholesky, &like_first>()},
      {"QRF", codec<QRF>()},
      {"SVD", codec<SVD>()},
      {"Eigh", codec<Eigh>()},
      {"Eig", codec<Eig>()},
      // quantized.h
      {"Quantize", codec<Quantize>()},
      {"Dequantize", codec<Dequantize, &dequantize_rule>()},
      {"QuantizedMatmul", codec<QuantizedMatmul, &quantized_matmul_rule>()},
      // fast.h
      {"RMSNorm", {&fast_parameters<fast::NormBase>, &build_norm<false>, Operands::fixed}},
      {"RMSNormVJP", {&fast_parameters<fast::NormBase>, &build_norm_vjp<false>, Operands::fixed}},
      {"LayerNorm", {&fast_parameters<fast::NormBase>, &build_norm<true>, Operands::fixed}},
      {"LayerNormVJP", {&fast_parameters<fast::NormBase>, &build_norm_vjp<true>, Operands::fixed}},
      {"RoPE", {&fast_parameters<fast::RoPE>, &build_rope, Operands::fixed}},
      {"ScaledDotProductAttention", {&fast_parameters<fast::ScaledDotProductAttention>, &build_attention, Operands::fixed}},
      {"ScaledDotProductAttentionVJP",
       {&fast_parameters<fast::ScaledDotProductAttentionVJP>, &build_attention_vjp, Operands::fixed}},
      // ops/depends.cpp
      {"Depends", {&no_parameters, &build_depends, Operands::fixed}},
  });
  return t;
}

}  // namespace

const PrimitiveCodec* find_codec(std::string_view name) {
  static const Table table = make_table();
  auto it = table.find(name);
  return it == table.end() ? nullptr : &it->second;
}

}  // namespace tessera::io::detail
