// The op harness every backend must pass: inputs of every dtype in every
// layout, compared with a float64 (or complex<double>) reference.
//
// The elementwise ops are described once, in op_table.h, and checked by the
// suites of test_elementwise.cpp; other families use these pieces directly:
//
//   for (Dtype t : harness::float_types()) {
//     for (const Shape& shape : harness::sweep_shapes()) {
//       for (auto layout : harness::all_layouts()) {
//         auto v = harness::random_values(shape_size(shape), t, -3, 3, /*seed=*/1);
//         if (layout == harness::Layout::broadcast) v = harness::rows_repeated(v, shape);
//         array x = harness::with_layout(v, shape, t, layout);
//         std::vector<double> want;
//         for (double e : v) want.push_back(std::exp(e));
//         harness::expect_values(exp(x), want, "exp");  // within rtol_for(t)
//       }
//     }
//   }
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace harness {

using namespace tessera;

inline std::vector<Dtype> all_types() { return {std::begin(all_dtypes), std::end(all_dtypes)}; }
inline std::vector<Dtype> real_types() {
  auto v = all_types();
  v.pop_back();  // complex64 is last
  return v;
}
inline std::vector<Dtype> float_types() { return {float16, bfloat16, float32, float64}; }
inline std::vector<Dtype> int_types() {
  return {uint8, uint16, uint32, uint64, int8, int16, int32, int64};
}
inline std::vector<Dtype> numeric_types() {  // everything but bool
  auto v = all_types();
  v.erase(v.begin());
  return v;
}

// Devices to run on: the CPU, and the GPU where one is present.
inline std::vector<Device> devices() {
  std::vector<Device> d{Device::cpu};
  if (is_available(Device::gpu)) d.push_back(Device::gpu);
  return d;
}

// Runs f once per device of devices(), as the default device.
template <class F>
void on_each_device(F f) {
  for (Device d : devices()) {
    StreamContext ctx(d);
    SCOPED_TRACE(d == Device::cpu ? "on the cpu" : "on the gpu");
    f();
  }
}

// Values an element of dtype t can hold exactly, drawn from [lo, hi].
inline std::vector<double> random_values(size_t n, Dtype t, double lo, double hi, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) {
    double r = dist(gen);
    if (t == bool_) {
      x = r > (lo + hi) / 2 ? 1.0 : 0.0;
    } else if (is_integer(t)) {
      x = std::round(r);
      if (is_unsigned(t) && x < 0) x = -x;
    } else if (t == float16) {
      x = static_cast<float>(float16_t(static_cast<float>(r)));
    } else if (t == bfloat16) {
      x = static_cast<float>(bfloat16_t(static_cast<float>(r)));
    } else if (t == float32 || t == complex64) {
      x = static_cast<float>(r);
    } else {
      x = r;
    }
  }
  return v;
}

// The values of an array as doubles (real parts), row-major.
inline std::vector<double> to_doubles(const array& a) {
  array c = copy(astype(a, float64));
  eval(c);
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.size());
}
inline std::vector<std::complex<double>> to_complex(const array& a) {
  array c = copy(astype(a, complex64));
  eval(c);
  const complex64_t* p = c.data<complex64_t>();
  std::vector<std::complex<double>> out(c.size());
  for (size_t i = 0; i < c.size(); ++i) out[i] = {p[i].real(), p[i].imag()};
  return out;
}

// An evaluated array of the given values.
inline array from_doubles(const std::vector<double>& v, const Shape& shape, Dtype t) {
  return astype(array(v.begin(), shape, float64), t);
}
inline array from_complex(const std::vector<std::complex<double>>& v, const Shape& shape) {
  std::vector<complex64_t> c(v.size());
  for (size_t i = 0; i < v.size(); ++i) c[i] = complex64_t(float(v[i].real()), float(v[i].imag()));
  return array(c.begin(), shape, complex64);
}

enum class Layout { contiguous, transposed, strided, broadcast };
inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::contiguous: return "contiguous";
    case Layout::transposed: return "transposed";
    case Layout::strided: return "strided";
    case Layout::broadcast: return "broadcast";
  }
  return "?";
}
inline std::vector<Layout> all_layouts() {
  return {Layout::contiguous, Layout::transposed, Layout::strided, Layout::broadcast};
}

namespace detail {
inline array make(const std::vector<double>& v, const Shape& shape, Dtype t) {
  return from_doubles(v, shape, t);
}
inline array make(const std::vector<std::complex<double>>& v, const Shape& shape, Dtype t) {
  return astype(from_complex(v, shape), t);
}

template <typename V>
array with_layout(const std::vector<V>& v, const Shape& shape, Dtype t, Layout layout) {
  int nd = static_cast<int>(shape.size());
  array out(0.0f);
  switch (layout) {
    case Layout::contiguous:
      out = make(v, shape, t);
      break;
    case Layout::transposed: {
      // Store the transpose, then view it transposed back.
      array stored = transpose(make(v, shape, t));
      out = transpose(contiguous(stored));
      break;
    }
    case Layout::strided: {
      // Every other element of a twice-as-long last axis.
      if (nd == 0) return make(v, shape, t);
      Shape wide = shape;
      wide.back() *= 2;
      std::vector<V> w(v.size() * 2, V(-7.0));
      for (size_t i = 0; i < v.size(); ++i) w[2 * i] = v[i];
      Shape start(nd, 0), stop = wide, step(nd, 1);
      step.back() = 2;
      out = slice(make(w, wide, t), start, stop, step);
      break;
    }
    case Layout::broadcast: {
      if (nd == 0) return make(v, shape, t);
      Shape row(shape.begin() + 1, shape.end());
      std::vector<V> r(shape_size(row), V(0.0));
      if (shape[0] > 0) std::copy(v.begin(), v.begin() + r.size(), r.begin());
      out = broadcast_to(make(r, row, t), shape);
      break;
    }
  }
  eval(out);
  return out;
}
}  // namespace detail

// The values v (row-major over shape) as an evaluated array of dtype t whose
// memory layout is `layout`. For broadcast, v must be constant along axis 0.
inline array with_layout(const std::vector<double>& v, const Shape& shape, Dtype t, Layout layout) {
  return detail::with_layout(v, shape, t, layout);
}
inline array with_layout(const std::vector<std::complex<double>>& v, const Shape& shape, Dtype t,
                         Layout layout) {
  return detail::with_layout(v, shape, t, layout);
}

// Tolerance for comparing a result of dtype t with a float64 reference.
inline double rtol_for(Dtype t) {
  if (t == float16) return 2e-3;
  if (t == bfloat16) return 1.6e-2;
  if (t == float32 || t == complex64) return 2e-6;
  if (t == float64) return 1e-12;
  return 0.0;
}

inline bool close(double got, double want, double rtol, double atol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::abs(got - want) <= atol + rtol * std::abs(want);
}

// EXPECTs got == want elementwise within the tolerance of got's dtype.
inline void expect_values(const array& got, const std::vector<double>& want, const std::string& ctx,
                          double rtol = -1, double atol = -1) {
  if (rtol < 0) rtol = rtol_for(got.dtype());
  if (atol < 0) atol = rtol;
  auto g = to_doubles(got);
  ASSERT_EQ(g.size(), want.size()) << ctx;
  int failures = 0;
  for (size_t i = 0; i < g.size() && failures < 5; ++i) {
    if (!close(g[i], want[i], rtol, atol)) {
      ADD_FAILURE() << ctx << ": element " << i << " is " << g[i] << ", expected " << want[i];
      ++failures;
    }
  }
}

// EXPECTs got == want elementwise, within tol relative and absolute.
inline void expect_complex(const array& got, const std::vector<std::complex<double>>& want,
                           const std::string& ctx, double tol) {
  auto g = to_complex(got);
  ASSERT_EQ(g.size(), want.size()) << ctx;
  int failures = 0;
  for (size_t i = 0; i < g.size() && failures < 5; ++i) {
    bool ok = std::abs(g[i] - want[i]) <= tol + tol * std::abs(want[i]);
    if (std::isnan(want[i].real()) || std::isnan(want[i].imag())) {
      ok = std::isnan(g[i].real()) || std::isnan(g[i].imag());
    }
    if (!ok) {
      ADD_FAILURE() << ctx << ": element " << i << " is " << g[i] << ", expected " << want[i];
      ++failures;
    }
  }
}

// How an op's result dtype follows from its (promoted) input dtype.
// real_part: as `same`, but complex64 gives float32 (abs, real, imag).
enum class Rule { same, float_out, boolean, real_part };
inline Dtype out_dtype(Rule rule, Dtype t) {
  switch (rule) {
    case Rule::same: return t;
    case Rule::float_out: return inexact_type(t);
    case Rule::boolean: return bool_;
    case Rule::real_part: return t == complex64 ? float32 : t;
  }
  return t;
}

// v (an exact integer) reduced into the range of integer dtype t, modulo 2^bits.
inline double wrap_int(double v, Dtype t) {
  if (t == bool_) return v != 0;
  if (!is_integer(t)) return v;
  double m = std::ldexp(1.0, 8 * t.size);
  double lo = is_signed_integer(t) ? -m / 2 : 0;
  if (v >= lo && v < lo + m) return v;  // in range (and exact for 64-bit types)
  double r = std::fmod(v, m);
  if (r < 0) r += m;
  if (is_signed_integer(t) && r >= m / 2) r -= m;
  return r;
}

// The shapes every op is swept over: scalar, vector, matrix, 3-D, empty.
inline std::vector<Shape> sweep_shapes() { return {{}, {7}, {3, 5}, {2, 3, 4}, {0, 3}}; }

// Values constant along axis 0 (so the broadcast layout can hold them).
template <typename V>
std::vector<V> rows_repeated(std::vector<V> v, const Shape& shape) {
  if (shape.empty() || shape[0] == 0) return v;
  size_t row = v.size() / shape[0];
  for (size_t i = row; i < v.size(); ++i) v[i] = v[i % row];
  return v;
}

// The values of v (row-major over `from`) broadcast to `to`, row-major.
template <typename V>
std::vector<V> broadcast_values(const std::vector<V>& v, const Shape& from, const Shape& to) {
  std::vector<V> out(shape_size(to));
  size_t off = to.size() - from.size();
  for (size_t i = 0; i < out.size(); ++i) {
    size_t rem = i, src = 0, stride = 1;
    for (int d = int(to.size()) - 1; d >= int(off); --d) {
      size_t idx = rem % to[d];
      rem /= to[d];
      int fd = d - int(off);
      if (from[fd] != 1) src += idx * stride;
      stride *= from[fd];
    }
    out[i] = v[src];
  }
  return out;
}

}  // namespace harness
