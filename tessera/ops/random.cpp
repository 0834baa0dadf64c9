// The samplers of tessera::random, built from RandomBits and public ops as
// ../shared/reference/random-algorithm.md states, so that they give MLX's
// numbers for the same key.
#include "tessera/ops/random.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

#include "tessera/core/streams.h"
#include "tessera/ops/ops.h"
#include "tessera/ops/primitives/random.h"

namespace tessera::random {

namespace {

void check_shape(const Shape& shape, const char* op) { check_non_negative(shape, op); }

void check_key(const array& key, const char* op) {
  if (key.dtype() != uint32) {
    throw_invalid(op, "expected a key of dtype uint32, got " + dtype_name(key.dtype()));
  }
  if (key.shape() != Shape{2}) {
    throw_invalid(op, "expected a key of shape " + shape_str(Shape{2}) + ", got " +
                          shape_str(key.shape()));
  }
}

void check_real_floating(Dtype dtype, const char* op) {
  if (!is_floating_point(dtype)) {
    throw_invalid(op, "can only generate numbers of a real floating dtype, got " +
                          dtype_name(dtype));
  }
}

array get_key(const std::optional<array>& key) {
  return key ? *key : KeySequence::default_().next();
}

// Bits for keys of shape (..., 2), any layout: the output is (...) + shape.
array random_bits(const array& keys, const Shape& shape, int width, Stream s) {
  array dense = contiguous(keys, false, s);
  auto p = std::make_shared<RandomBits>(s, shape, width);
  Shape out_shape = p->output_shapes({dense})[0];
  Dtype t = p->dtype_of_width();
  return array(std::move(out_shape), t, std::move(p), {dense});
}

// The largest value below 1 of dtype, held in float32 (float64 uses float32's).
float below_one(Dtype dtype) {
  if (dtype == float16) return 1.0f - 1.0f / 2048.0f;
  if (dtype == bfloat16) return 1.0f - 1.0f / 256.0f;
  return std::nextafter(1.0f, 0.0f);
}

// Uniform on [nextafter(-1, 0), 1) in float32: the input of erfinv.
array symmetric_uniform(const Shape& shape, const std::optional<array>& key, Stream s) {
  return uniform(array(std::nextafter(-1.0f, 0.0f)), array(1.0f), shape, float32, key, s);
}

// The lower Cholesky factor of symmetric positive semi-definite matrices
// (..., n, n), column by column (a zero pivot gives a zero column).
array cholesky_lower(const array& a, Stream s) {
  const int nd = static_cast<int>(a.ndim());
  const int n = a.shape(nd - 1);
  std::vector<array> cols;
  array rows = arange(0, n, s);
  for (int j = 0; j < n; ++j) {
    Shape start(nd, 0), stop = a.shape();
    start[nd - 1] = j;
    stop[nd - 1] = j + 1;
    array col = slice(a, start, stop, s);  // (..., n, 1)
    if (j > 0) {
      array prev = stack(cols, -1, s);  // (..., n, j)
      Shape rs(nd, 0), re = prev.shape();
      rs[nd - 2] = j;
      re[nd - 2] = j + 1;
      col = subtract(col, matmul(prev, swapaxes(slice(prev, rs, re, s), -1, -2, s), s), s);
    }
    col = squeeze(col, -1, s);  // (..., n)
    Shape ds(nd - 1, 0), de = col.shape();
    ds[nd - 2] = j;
    de[nd - 2] = j + 1;
    array d = sqrt(maximum(slice(col, ds, de, s), array(0.0f), s), s);
    array safe = where(greater(d, array(0.0f), s), d, array(1.0f), s);
    array keep = logical_and(greater_equal(rows, array(j), s), greater(d, array(0.0f), s), s);
    cols.push_back(where(keep, divide(col, safe, s), array(0.0f), s));
  }
  return stack(cols, -1, s);
}

// Refuses covariances with NaN or infinite entries and those that are not
// positive semi-definite (a Cholesky factorisation in float64 whose pivot
// falls below -tolerance). Traced covariances have no values to check.
void check_covariance(const array& cov) {
  if (cov.is_tracer() || cov.size() == 0) return;
  array c = astype(cov, float64, Device::cpu);
  c.eval();
  c = contiguous(c, false, Device::cpu);
  c.eval();
  const int64_t n = cov.shape(-1);
  const double* p = c.data<double>();
  std::vector<double> l(n * n);
  for (size_t b = 0; b < c.size() / static_cast<size_t>(n * n); ++b) {
    const double* a = p + b * n * n;
    double scale = 0;
    for (int64_t i = 0; i < n * n; ++i) {
      if (!std::isfinite(a[i])) {
        throw_invalid("multivariate_normal", "cov holds NaN or infinite values");
      }
    }
    for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::abs(a[i * n + i]));
    const double tol = 1e-6 * static_cast<double>(n) * std::max(scale, 1e-30);
    std::fill(l.begin(), l.end(), 0.0);
    for (int64_t j = 0; j < n; ++j) {
      double d = a[j * n + j];
      for (int64_t k = 0; k < j; ++k) d -= l[j * n + k] * l[j * n + k];
      if (d < -tol) {
        throw_invalid("multivariate_normal", "cov is not positive semi-definite (pivot " +
                                                 std::to_string(d) + " at row " +
                                                 std::to_string(j) + ")");
      }
      if (d <= tol) continue;  // a zero column, as cholesky_lower makes it
      const double r = std::sqrt(d);
      l[j * n + j] = r;
      for (int64_t i = j + 1; i < n; ++i) {
        double v = a[i * n + j];
        for (int64_t k = 0; k < j; ++k) v -= l[i * n + k] * l[j * n + k];
        l[i * n + j] = v / r;
      }
    }
  }
}

}  // namespace

// ---- keys -------------------------------------------------------------------

KeySequence::KeySequence(uint64_t seed) : key_(random::key(seed)) {}

void KeySequence::seed(uint64_t seed) { key_ = random::key(seed); }

array KeySequence::next() {
  auto [next_key, use] = random::split(key_);
  key_ = next_key;
  return use;
}

void KeySequence::set_key(array k) {
  check_key(k, "random.state");
  key_ = std::move(k);
}

namespace {
// The seed of every thread's implicit key: the clock (ms) at its first use.
uint64_t start_seed() {
  static const uint64_t time_seed = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
  return time_seed;
}

// clear_streams() gives the calling thread the key of a new thread again.
const bool reset_on_clear_streams =
    (on_clear_streams([] { KeySequence::default_().seed(start_seed()); }), true);
}  // namespace

KeySequence& KeySequence::default_() {
  static thread_local KeySequence ks(start_seed());
  return ks;
}

array key(uint64_t seed) {
  return array({static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(seed)}, uint32);
}

void seed(uint64_t seed) { KeySequence::default_().seed(seed); }

array bits(const Shape& shape, int width, const std::optional<array>& key_, StreamOrDevice s) {
  if (width != 1 && width != 2 && width != 4) {
    throw_invalid("bits", "width must be 1, 2 or 4, got " + std::to_string(width));
  }
  check_shape(shape, "bits");
  array k = get_key(key_);
  check_key(k, "bits");
  return random_bits(k, shape, width, to_stream(s));
}

std::pair<array, array> split(const array& key, StreamOrDevice s) {
  auto stream = to_stream(s);
  array keys = random::split(key, 2, stream);
  return {reshape(slice(keys, {0, 0}, {1, 2}, stream), {2}, stream),
          reshape(slice(keys, {1, 0}, {2, 2}, stream), {2}, stream)};
}

array split(const array& key, int num, StreamOrDevice s) {
  if (num < 0) throw_invalid("split", "num must be non-negative, got " + std::to_string(num));
  check_key(key, "split");
  return random_bits(key, {num, 2}, 4, to_stream(s));
}

// ---- continuous samplers ------------------------------------------------------

array uniform(const array& low, const array& high, const Shape& shape, Dtype dtype,
              const std::optional<array>& key, StreamOrDevice s) {
  check_real_floating(dtype, "uniform");
  check_shape(shape, "uniform");
  auto stream = to_stream(s);
  array lo = astype(low, dtype, stream);
  array hi = astype(high, dtype, stream);
  array range = subtract(hi, lo, stream);
  if (broadcast_shapes(shape, range.shape(), "uniform") != shape) {
    throw_invalid("uniform", "cannot generate random values of shape " + shape_str(shape) +
                                 " from bounds of shape " + shape_str(range.shape()));
  }
  array u = divide(astype(bits(shape, 4, key, stream), float32, stream),
                   array(static_cast<float>(std::numeric_limits<uint32_t>::max())), stream);
  u = astype(minimum(u, array(below_one(dtype)), stream), dtype, stream);
  return add(multiply(range, u, stream), lo, stream);
}

array uniform(const Shape& shape, Dtype dtype, const std::optional<array>& key,
              StreamOrDevice s) {
  return uniform(array(0.0f, dtype), array(1.0f, dtype), shape, dtype, key, s);
}

array normal(const Shape& shape, Dtype dtype, const std::optional<array>& loc,
             const std::optional<array>& scale, const std::optional<array>& key,
             StreamOrDevice s) {
  if (!is_floating_point(dtype) && dtype != complex64) {
    throw_invalid("normal", "only real floating dtypes and complex64 are supported, got " +
                                dtype_name(dtype));
  }
  check_shape(shape, "normal");
  auto stream = to_stream(s);
  array samples(0.0f);
  if (dtype == complex64) {
    Shape pairs = shape;
    pairs.push_back(2);
    samples = reshape(view(erfinv(symmetric_uniform(pairs, key, stream), stream), complex64, stream),
                      shape, stream);
    if (scale) samples = multiply(*scale, samples, stream);
  } else {
    array applied_scale = array(std::sqrt(2.0), dtype);
    if (scale) applied_scale = multiply(applied_scale, *scale, stream);
    samples = multiply(applied_scale,
                       astype(erfinv(symmetric_uniform(shape, key, stream), stream), dtype, stream),
                       stream);
  }
  if (loc) samples = add(*loc, samples, stream);
  return samples;
}

array multivariate_normal(const array& mean, const array& cov, const Shape& shape, Dtype dtype,
                          const std::optional<array>& key, StreamOrDevice s) {
  if (mean.ndim() < 1) {
    throw_invalid("multivariate_normal", "mean must have at least one dimension, got shape " +
                                             shape_str(mean.shape()));
  }
  if (cov.ndim() < 2) {
    throw_invalid("multivariate_normal", "cov must have at least two dimensions, got shape " +
                                             shape_str(cov.shape()));
  }
  const int n = mean.shape(-1);
  if (cov.shape(-1) != cov.shape(-2)) {
    throw_invalid("multivariate_normal", "the last two dimensions of cov must be equal, got shape " +
                                             shape_str(cov.shape()));
  }
  if (cov.shape(-1) != n) {
    throw_invalid("multivariate_normal", "mean of shape " + shape_str(mean.shape()) +
                                             " and cov of shape " + shape_str(cov.shape()) +
                                             " are not compatible");
  }
  if (dtype != float32) {
    throw_invalid("multivariate_normal", "dtype must be float32, got " + dtype_name(dtype));
  }
  check_shape(shape, "multivariate_normal");
  auto stream = to_stream(s);
  Shape batch = broadcast_shapes(shape, Shape(mean.shape().begin(), mean.shape().end() - 1),
                                 "multivariate_normal");
  batch = broadcast_shapes(batch, Shape(cov.shape().begin(), cov.shape().end() - 2),
                           "multivariate_normal");
  Shape out_shape = batch;
  out_shape.push_back(n);
  check_covariance(cov);
  // x = mean + L z with L L^T = cov; as rows, z^T L^T.
  array l = cholesky_lower(astype(cov, float32, stream), stream);
  array z = normal(out_shape, float32, std::nullopt, std::nullopt, key, stream);
  array scaled = squeeze(matmul(expand_dims(z, -2, stream), swapaxes(l, -1, -2, stream), stream),
                         -2, stream);
  return add(astype(mean, float32, stream), scaled, stream);
}

array truncated_normal(const array& lower, const array& upper, const Shape& shape, Dtype dtype,
                       const std::optional<array>& key, StreamOrDevice s) {
  check_real_floating(dtype, "truncated_normal");
  check_shape(shape, "truncated_normal");
  auto stream = to_stream(s);
  array sqrt2 = array(std::sqrt(2.0), dtype);
  array lo = astype(lower, dtype, stream);
  array hi = astype(upper, dtype, stream);
  array a = erf(divide(lo, sqrt2, stream), stream);
  array b = erf(divide(hi, sqrt2, stream), stream);
  array u = uniform(a, b, shape, dtype, key, stream);
  array out = multiply(sqrt2, erfinv(u, stream), stream);
  return maximum(minimum(hi, out, stream), lo, stream);
}

array truncated_normal(const array& lower, const array& upper, Dtype dtype,
                       const std::optional<array>& key, StreamOrDevice s) {
  Shape shape = broadcast_shapes(lower.shape(), upper.shape(), "truncated_normal");
  return truncated_normal(lower, upper, shape, dtype, key, s);
}

array gumbel(const Shape& shape, Dtype dtype, const std::optional<array>& key,
             StreamOrDevice s) {
  check_real_floating(dtype, "gumbel");
  check_shape(shape, "gumbel");
  auto stream = to_stream(s);
  return negative(log(negative(log(uniform(shape, dtype, key, stream), stream), stream), stream),
                  stream);
}

array laplace(const Shape& shape, Dtype dtype, const float loc, const float scale,
              const std::optional<array>& key, StreamOrDevice s) {
  check_real_floating(dtype, "laplace");
  check_shape(shape, "laplace");
  auto stream = to_stream(s);
  array u = symmetric_uniform(shape, key, stream);
  array samples = multiply(
      sign(u, stream), log1p(multiply(array(-1.0f), abs(u, stream), stream), stream), stream);
  samples = astype(samples, dtype, stream);
  if (scale != 1.0f) samples = multiply(array(scale, dtype), samples, stream);
  if (loc != 0.0f) samples = add(array(loc, dtype), samples, stream);
  return samples;
}

// ---- discrete samplers --------------------------------------------------------

array randint(const array& low, const array& high, const Shape& shape, Dtype dtype,
              const std::optional<array>& key, StreamOrDevice s) {
  if (is_inexact(dtype)) {
    throw_invalid("randint", "only integer dtypes and bool are supported, got " +
                                 dtype_name(dtype));
  }
  check_shape(shape, "randint");
  broadcast_shapes(broadcast_shapes(low.shape(), high.shape(), "randint"), shape, "randint");
  auto stream = to_stream(s);
  array u = floor(uniform(low, high, shape, float32, key, stream), stream);
  array top = subtract(astype(high, float32, stream), array(1.0f), stream);
  u = maximum(minimum(u, top, stream), astype(low, float32, stream), stream);
  return astype(u, dtype, stream);
}

array bernoulli(const array& p, const Shape& shape, const std::optional<array>& key,
                StreamOrDevice s) {
  if (!is_floating_point(p.dtype())) {
    throw_invalid("bernoulli", "the probability p must have a real floating dtype, got " +
                                   dtype_name(p.dtype()));
  }
  check_shape(shape, "bernoulli");
  if (broadcast_shapes(p.shape(), shape, "bernoulli") != shape) {
    throw_invalid("bernoulli", "p of shape " + shape_str(p.shape()) +
                                   " does not broadcast to shape " + shape_str(shape));
  }
  auto stream = to_stream(s);
  // p on the scale of the bits: [0, nextafter(2^32 - 1, inf)] in float32.
  const float top =
      std::nextafter(static_cast<float>(std::numeric_limits<uint32_t>::max()),
                     std::numeric_limits<float>::infinity());
  return less(astype(bits(shape, 4, key, stream), float32, stream),
              multiply(astype(p, float32, stream), array(top), stream), stream);
}

array bernoulli_like(const array& p, const std::optional<array>& key, StreamOrDevice s) {
  return bernoulli(p, p.shape(), key, s);
}

array bernoulli(const std::optional<array>& key, StreamOrDevice s) {
  return bernoulli_like(array(0.5f), key, s);
}

namespace {

// Gumbel-max: draws gumbel noise of `shape` with the logits' axis inserted,
// adds the logits and takes the argmax over that axis. One distribution (1-D
// logits, the reference's special case, or logits whose other axes are all 1,
// where MLX 0.32.4 does the same) drawn into a non-empty shape uses the
// inverse CDF instead.
// Logits whose largest entry along the axis is not finite, replaced by the
// limit of their distribution: +inf entries share the mass equally and all
// -inf is uniform; with a NaN, the first NaN is drawn (the argmax of
// logits + Gumbel noise, as MLX samples, picks it).
array finite_logits(const array& logits, int axis, Stream s) {
  if (!is_floating_point(logits.dtype()) || logits.size() == 0) return logits;
  const float inf = std::numeric_limits<float>::infinity();
  array zero(0.0f), minus(-inf);
  array nan = isnan(logits, s);
  Shape along(logits.ndim(), 1);
  along[axis] = logits.shape(axis);
  array index = reshape(arange(logits.shape(axis), s), along, s);
  array first_nan = equal(index, argmax(astype(nan, float32, s), axis, true, s), s);
  array pos = isposinf(logits, s);
  array all_neg = all(isneginf(logits, s), axis, true, s);
  array fixed = where(all_neg, zero, logits, s);
  fixed = where(any(pos, axis, true, s), where(pos, zero, minus, s), fixed, s);
  fixed = where(any(nan, axis, true, s), where(first_nan, zero, minus, s), fixed, s);
  return astype(fixed, logits.dtype(), s);
}

array categorical_impl(const array& logits_, int axis, const Shape& shape,
                       const std::optional<array>& key, Stream s) {
  array logits = finite_logits(logits_, axis, s);
  // One distribution (1-D logits, or every other axis of size 1, as mlx-lm's
  // (1, vocab) logits) drawn into a shape: by the inverse CDF, as MLX draws it.
  if (logits.size() > 0 && static_cast<int64_t>(logits.size()) == logits.shape(axis) &&
      !shape.empty()) {
    array x = astype(reshape(logits, {logits.shape(axis)}, s), float32, s);
    array w = exp(subtract(x, max(x, s), s), s);
    const int k = w.shape(0);
    array inclusive = cumsum(w, 0, false, true, s);
    array cdf = pad(slice(inclusive, {0}, {k - 1}, s), {0}, {1}, {0}, array(0.0f), "constant", s);
    array u = multiply(uniform(shape, float32, key, s), sum(w, s), s);
    array below = less_equal(cdf, expand_dims(u, -1, s), s);
    return astype(subtract(sum(astype(below, int32, s), -1, false, s), array(1), s), uint32, s);
  }
  Shape gumbel_shape = shape;
  const int offset = axis + static_cast<int>(shape.size()) - static_cast<int>(logits.ndim()) + 1;
  gumbel_shape.insert(gumbel_shape.begin() + offset, logits.shape(axis));
  array g = gumbel(gumbel_shape, float32, key, s);
  return argmax(add(g, logits, s), offset, false, s);
}

int categorical_axis(const array& logits, int axis) {
  const int nd = static_cast<int>(logits.ndim());
  if (axis < -nd || axis >= nd) {
    throw std::out_of_range("[categorical] axis " + std::to_string(axis) +
                            " is out of bounds for logits with " + std::to_string(nd) +
                            " dimensions");
  }
  return axis < 0 ? axis + nd : axis;
}

}  // namespace

array categorical(const array& logits, int axis, const Shape& shape,
                  const std::optional<array>& key, StreamOrDevice s) {
  axis = categorical_axis(logits, axis);
  check_shape(shape, "categorical");
  Shape reduced = logits.shape();
  reduced.erase(reduced.begin() + axis);
  if (broadcast_shapes(shape, reduced, "categorical") != shape) {
    throw_invalid("categorical", "shape " + shape_str(shape) +
                                     " is not compatible with logits of shape " +
                                     shape_str(logits.shape()) + " without axis " +
                                     std::to_string(axis));
  }
  return categorical_impl(logits, axis, shape, key, to_stream(s));
}

array categorical(const array& logits_, int axis, int num_samples,
                  const std::optional<array>& key, StreamOrDevice s) {
  axis = categorical_axis(logits_, axis);
  if (num_samples < 0) {
    throw_invalid("categorical", "num_samples must be non-negative, got " +
                                     std::to_string(num_samples));
  }
  auto stream = to_stream(s);
  // 1-D logits: num_samples draws of the inverse CDF.
  if (logits_.ndim() == 1) return categorical_impl(logits_, axis, {num_samples}, key, stream);
  array logits = expand_dims(logits_, -1, stream);
  Shape shape = logits.shape();
  shape.erase(shape.begin() + axis);
  shape.back() = num_samples;
  return categorical_impl(logits, axis, shape, key, stream);
}

array categorical_along(const array& logits, int axis, const std::optional<array>& key,
                        StreamOrDevice s) {
  axis = categorical_axis(logits, axis);
  Shape shape = logits.shape();
  shape.erase(shape.begin() + axis);
  return categorical_impl(logits, axis, shape, key, to_stream(s));
}

// ---- permutation -----------------------------------------------------------------
//
// The stable argsort of bits((n,)); an array is taken along its axis in that
// order.

array permutation(int x, const std::optional<array>& key, StreamOrDevice s) {
  if (x < 0) throw_invalid("permutation", "x must be non-negative, got " + std::to_string(x));
  auto stream = to_stream(s);
  if (x == 0) return zeros({0}, uint32, stream);
  return argsort(bits({x}, 4, key, stream), 0, stream);
}

array permutation(const array& x, int axis, const std::optional<array>& key, StreamOrDevice s) {
  const int nd = static_cast<int>(x.ndim());
  if (axis < -nd || axis >= nd) {
    throw std::out_of_range("[permutation] axis " + std::to_string(axis) +
                            " is out of bounds for an array with " + std::to_string(nd) +
                            " dimensions");
  }
  if (axis < 0) axis += nd;
  auto stream = to_stream(s);
  return take(x, permutation(x.shape(axis), key, stream), axis, stream);
}

}  // namespace tessera::random

namespace tessera {

std::vector<Shape> RandomBits::output_shapes(const std::vector<array>& inputs) {
  Shape out(inputs[0].shape().begin(), inputs[0].shape().end() - 1);
  out.insert(out.end(), shape_.begin(), shape_.end());
  return {out};
}

}  // namespace tessera
