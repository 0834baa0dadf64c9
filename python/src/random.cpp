// The submodule tessera.core.random: keys and
// samplers. Every parameter is positional-or-keyword, `key` and `stream` last.
#include "convert.h"

namespace tessera::python {

namespace {

using Key = std::optional<array>;

// A bound: a Python scalar takes the sample dtype (the weak-scalar rule), an
// array keeps its own.
array bound(nb::handle v, Dtype hint) {
  return is_python_scalar(v) ? scalar_to_array(v, hint) : to_array(v);
}

std::optional<array> optional_bound(nb::handle v, Dtype hint) {
  if (v.is_none()) return std::nullopt;
  return bound(v, hint);
}

}  // namespace

void init_random(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("random", "Splittable counter-based random numbers");
  def_named(m, "seed", [](nb::int_ seed) { random::seed(to_uint64(seed, "random.seed", "seed")); },
        "seed"_a);
  def_named(m, "key", [](nb::int_ seed) { return random::key(to_uint64(seed, "random.key", "seed")); },
        "seed"_a);
  // The calling thread's global key, read and replaced (random.state).
  def_named(m, "_get_key", [] { return random::KeySequence::default_().key(); });
  def_named(m, "_set_key", [](array key) { random::KeySequence::default_().set_key(std::move(key)); },
        "key"_a);
  def_named(m, "split", [](const array& key, int num, StreamArg s) { return random::split(key, num, s); },
        "key"_a, "num"_a = 2, "stream"_a = nb::none());
  def_named(m, "bits", [](nb::handle shape, int width, const Key& key, StreamArg s) {
    return random::bits(to_shape(shape, "random.bits"), width, key, s);
  }, "shape"_a = nb::list(), "width"_a = 4, "key"_a = nb::none(), "stream"_a = nb::none());
  def_named(m, "uniform", [](nb::handle low, nb::handle high, nb::handle shape, Dtype dtype,
                      const Key& key, StreamArg s) {
    return random::uniform(bound(low, dtype), bound(high, dtype),
                           to_shape(shape, "random.uniform"), dtype, key, s);
  }, "low"_a = 0, "high"_a = 1, "shape"_a = nb::list(), "dtype"_a = float32,
        "key"_a = nb::none(), "stream"_a = nb::none());
  def_named(m, "normal", [](nb::handle shape, Dtype dtype, nb::handle loc, nb::handle scale,
                     const Key& key, StreamArg s) {
    return random::normal(to_shape(shape, "random.normal"), dtype, optional_bound(loc, dtype),
                          optional_bound(scale, dtype), key, s);
  }, "shape"_a = nb::list(), "dtype"_a = float32, "loc"_a = nb::none(), "scale"_a = nb::none(),
        "key"_a = nb::none(), "stream"_a = nb::none());
  def_named(m, "multivariate_normal", [](nb::handle mean, nb::handle cov, nb::handle shape, Dtype dtype,
                                  const Key& key, StreamArg s) {
    return random::multivariate_normal(to_array(mean), to_array(cov),
                                       to_shape(shape, "random.multivariate_normal"), dtype, key,
                                       s);
  }, "mean"_a, "cov"_a, "shape"_a = nb::list(), "dtype"_a = float32, "key"_a = nb::none(),
        "stream"_a = nb::none());
  def_named(m, "randint", [](nb::handle low, nb::handle high, nb::handle shape, Dtype dtype,
                      const Key& key, StreamArg s) {
    return random::randint(bound(low, dtype), bound(high, dtype),
                           to_shape(shape, "random.randint"), dtype, key, s);
  }, "low"_a, "high"_a, "shape"_a = nb::list(), "dtype"_a = int32, "key"_a = nb::none(),
        "stream"_a = nb::none());
  def_named(m, "bernoulli", [](nb::handle p, nb::handle shape, const Key& key, StreamArg s) {
    array prob = bound(p, float32);
    if (shape.is_none()) return random::bernoulli_like(prob, key, s);
    return random::bernoulli(prob, to_shape(shape, "random.bernoulli"), key, s);
  }, "p"_a = 0.5, "shape"_a = nb::none(), "key"_a = nb::none(), "stream"_a = nb::none());
  def_named(m, "truncated_normal", [](nb::handle lower, nb::handle upper, nb::handle shape, Dtype dtype,
                               const Key& key, StreamArg s) {
    array lo = bound(lower, dtype), hi = bound(upper, dtype);
    if (shape.is_none()) return random::truncated_normal(lo, hi, dtype, key, s);
    return random::truncated_normal(lo, hi, to_shape(shape, "random.truncated_normal"), dtype,
                                    key, s);
  }, "lower"_a, "upper"_a, "shape"_a = nb::none(), "dtype"_a = float32, "key"_a = nb::none(),
        "stream"_a = nb::none());
  def_named(m, "gumbel", [](nb::handle shape, Dtype dtype, const Key& key, StreamArg s) {
    return random::gumbel(to_shape(shape, "random.gumbel"), dtype, key, s);
  }, "shape"_a = nb::list(), "dtype"_a = float32, "key"_a = nb::none(), "stream"_a = nb::none());
  def_named(m, "categorical", [](nb::handle logits, int axis, nb::handle shape,
                          std::optional<int> num_samples, const Key& key, StreamArg s) {
    array x = to_array(logits);
    if (!shape.is_none() && num_samples) {
      throw std::invalid_argument(
          "[random.categorical] at most one of shape or num_samples can be given");
    }
    if (num_samples) return random::categorical(x, axis, *num_samples, key, s);
    if (!shape.is_none()) {
      return random::categorical(x, axis, to_shape(shape, "random.categorical"), key, s);
    }
    return random::categorical_along(x, axis, key, s);
  }, "logits"_a, "axis"_a = -1, "shape"_a = nb::none(), "num_samples"_a = nb::none(),
        "key"_a = nb::none(), "stream"_a = nb::none());
  def_named(m, "laplace", [](nb::handle shape, Dtype dtype, float loc, float scale, const Key& key,
                      StreamArg s) {
    return random::laplace(to_shape(shape, "random.laplace"), dtype, loc, scale, key, s);
  }, "shape"_a = nb::list(), "dtype"_a = float32, "loc"_a = 0.0f, "scale"_a = 1.0f,
        "key"_a = nb::none(), "stream"_a = nb::none());
  def_named(m, "permutation", [](nb::handle x, int axis, const Key& key, StreamArg s) {
    if (PyLong_Check(x.ptr()) && !PyBool_Check(x.ptr())) {
      return random::permutation(nb::cast<int>(x), key, s);
    }
    return random::permutation(to_array(x), axis, key, s);
  }, "x"_a, "axis"_a = 0, "key"_a = nb::none(), "stream"_a = nb::none());
}

}  // namespace tessera::python
