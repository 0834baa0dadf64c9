// Scalar functors of the elementwise ops: one struct per op, shared by the
// generic unary and binary kernels (and, marked TESSERA_HD, by a CUDA backend).
//
//   scalar::Add{}(1.5f, 2.0f);                 // 3.5f
//   scalar::Add::supports<bool>                // true: the (op, type) table
//
// Functors see compute types only: bool, the integers, float, double and
// complex64_t (16-bit floats are converted to float by the kernels, compute_t).
// CUDA kernels call them with cuda::std::complex<float> for complex64: the
// arithmetic of std::complex does not compile correctly in device code, so
// functors never use std::complex operators or std:: math on a complex
// argument by name; they call math unqualified after `using std::F;`, which
// finds std::F on the host and cuda::std::F (by argument lookup) on the device.
// The result type of operator() is the output element type, except that a
// result equal to the compute type is stored back in the input's type.
//
// Note [Supported types]
// `template <typename T> static constexpr bool supports` on each functor is the
// table of (op, compute type) pairs that exist. Kernels instantiate an op only
// for supported types and report the rest by name; the op functions validate
// dtypes before a node is made, so the kernel check is a last line.
//
// Note [Integer semantics]
// Integer arithmetic wraps (two's complement), computed in unsigned types so
// that no overflow is undefined. Integer division floors (-7 // 2 == -4, as
// Python and MLX); division and remainder by zero give 0; INT_MIN // -1 wraps
// to INT_MIN. Shifts by a negative count or by at least the width give 0
// (right shift of a negative value: -1). An integer to a negative integer power
// is 0 (MLX's result; NumPy refuses it).
//
// The fused kernels compile this file at run time with NVRTC
// (backend/cuda/fused_source.cpp), after a prelude that stands in for the
// headers: the part under `#ifndef __CUDACC_RTC__` is host code only.
#pragma once

#ifndef __CUDACC_RTC__
#include <cmath>
#include <complex>
#include <limits>
#include <type_traits>

#include "tessera/core/dispatch.h"

#ifdef __CUDACC__
#include <cuda/std/complex>
#endif

namespace tessera {

// Calls f(TypeTag<T>{}) for the stored type T of dtype t when the functor Op
// supports T's compute type (Note [Supported types]); otherwise throws the one
// message of every backend: "[bitwise_and] is not defined for dtype float32".
template <typename Op, typename F>
void dispatch_supported(Dtype t, const char* name, F&& f) {
  dispatch_all(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (Op::template supports<compute_t<T>>) {
      f(tag);
    } else {
      throw std::invalid_argument(std::string("[") + name + "] is not defined for dtype " +
                                  dtype_name(t));
    }
  });
}

}  // namespace tessera
#endif  // __CUDACC_RTC__

namespace tessera::scalar {

namespace detail {

// complex64_t, or its device twin in CUDA kernels.
template <typename T>
inline constexpr bool is_cx = is_complex_v<T>
#ifdef __CUDACC__
                              || std::is_same_v<T, cuda::std::complex<float>>
#endif
    ;

// Unsigned arithmetic type with the width of T, at least `unsigned` (so that
// narrow operands do not promote to a signed int that could overflow).
template <typename T, bool = is_integral_v<T>>
struct Wrap {
  using type = T;
};
template <typename T>
struct Wrap<T, true> {
  using type = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
};
template <typename T>
using wrap_t = typename Wrap<T>::type;

template <typename T>
TESSERA_HD inline bool is_nan(T x) {
  if constexpr (detail::is_cx<T>) {
    return std::isnan(x.real()) || std::isnan(x.imag());
  } else if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(x);
  } else {
    return false;
  }
}

template <typename T>
TESSERA_HD inline bool truthy(T x) {
  if constexpr (detail::is_cx<T>) {
    return x.real() != 0 || x.imag() != 0;
  } else {
    return x != T(0);
  }
}

// Lexicographic order on complex numbers (NumPy), the usual one otherwise.
template <typename T>
TESSERA_HD inline bool less(T a, T b) {
  if constexpr (detail::is_cx<T>) {
    return a.real() < b.real() || (a.real() == b.real() && a.imag() < b.imag());
  } else {
    return a < b;
  }
}

// Giles' single-precision approximation of erfinv, for |a| < 1.
TESSERA_HD inline double erfinv_approx(double a) {
  double w = -std::log((1.0 - a) * (1.0 + a));
  double p;
  if (w < 5.0) {
    w = w - 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  return p * a;
}

// erfinv in double: the approximation refined by Newton steps on erf.
TESSERA_HD inline double erfinv(double y) {
  if (std::isnan(y) || y < -1.0 || y > 1.0) return std::numeric_limits<double>::quiet_NaN();
  if (y == 1.0 || y == -1.0) return std::copysign(std::numeric_limits<double>::infinity(), y);
  double x = erfinv_approx(y);
  constexpr double two_over_sqrt_pi = 1.1283791670955126;
  for (int i = 0; i < 2; ++i) {
    double d = two_over_sqrt_pi * std::exp(-x * x);
    if (d == 0.0) break;
    x -= (std::erf(x) - y) / d;
  }
  return x;
}

}  // namespace detail

// Type classes for the supports tables.
struct OnAll {
  template <typename T>
  static constexpr bool supports = true;
};
struct OnNumbers {  // everything but bool
  template <typename T>
  static constexpr bool supports = !std::is_same_v<T, bool>;
};
struct OnReal {  // everything but complex
  template <typename T>
  static constexpr bool supports = !detail::is_cx<T>;
};
struct OnIntegersAndBool {
  template <typename T>
  static constexpr bool supports = std::is_integral_v<T>;
};
struct OnIntegers {
  template <typename T>
  static constexpr bool supports = is_integral_v<T>;
};
struct OnInexact {  // floating and complex compute types
  template <typename T>
  static constexpr bool supports = std::is_floating_point_v<T> || detail::is_cx<T>;
};
struct OnFloating {
  template <typename T>
  static constexpr bool supports = std::is_floating_point_v<T>;
};

// ---- unary ------------------------------------------------------------------

struct Abs : OnAll {
  template <typename T>
  TESSERA_HD auto operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) {
      return x;
    } else if constexpr (std::is_integral_v<T>) {
      using U = detail::wrap_t<T>;
      return x < 0 ? T(U(0) - U(x)) : x;
    } else {
      using std::abs;
      return abs(x);
    }
  }
};

struct Negative : OnNumbers {
  template <typename T>
  TESSERA_HD T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      using U = detail::wrap_t<T>;
      return T(U(0) - U(x));
    } else {
      return -x;
    }
  }
};

struct Sign : OnAll {
  template <typename T>
  TESSERA_HD T operator()(T x) const {
    if constexpr (detail::is_cx<T>) {
      using std::abs;
      float m = abs(x);
      return m == 0 ? T(0) : x / m;
    } else if constexpr (std::is_same_v<T, bool> || std::is_unsigned_v<T>) {
      return x != 0;
    } else if constexpr (std::is_integral_v<T>) {
      return T((x > 0) - (x < 0));
    } else {
      if (std::isnan(x)) return x;
      return T((x > 0) - (x < 0));
    }
  }
};

struct LogicalNot : OnAll {
  template <typename T>
  TESSERA_HD bool operator()(T x) const {
    return !detail::truthy(x);
  }
};

struct Reciprocal : OnInexact {
  template <typename T>
  TESSERA_HD T operator()(T x) const {
    return T(1) / x;
  }
};

struct Floor : OnReal {
  template <typename T>
  TESSERA_HD T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::floor(x);
    else return x;
  }
};

struct Ceil : OnReal {
  template <typename T>
  TESSERA_HD T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::ceil(x);
    else return x;
  }
};

struct Trunc : OnReal {
  template <typename T>
  TESSERA_HD T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::trunc(x);
    else return x;
  }
};

// Half to even at `decimals` places (computed in floating point).
struct Round : OnAll {
  int decimals = 0;
  template <typename T>
  TESSERA_HD T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) {
      return decimals >= 0 && x;  // 0.5 rounds to 0
    } else if constexpr (detail::is_cx<T>) {
      return T(round_real(x.real()), round_real(x.imag()));
    } else if constexpr (std::is_floating_point_v<T>) {
      return round_real(x);
    } else {
      if (decimals >= 0) return x;
      double s = std::pow(10.0, -decimals);
      return static_cast<T>(std::nearbyint(static_cast<double>(x) / s) * s);
    }
  }
  template <typename F>
  TESSERA_HD F round_real(F x) const {
    if (decimals == 0) return std::nearbyint(x);
    F s = static_cast<F>(std::pow(10.0, decimals));
    return std::nearbyint(x * s) / s;
  }
};

struct Square : OnAll {
  template <typename T>
  TESSERA_HD T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) {
      return x;
    } else if constexpr (std::is_integral_v<T>) {
      using U = detail::wrap_t<T>;
      return T(U(x) * U(x));
    } else {
      return x * x;
    }
  }
};

// FN names the std:: function; EXPR may call it unqualified (see the top note).
#define TESSERA_MATH_FUNCTOR(NAME, FN, EXPR)  \
  struct NAME : OnInexact {                   \
    template <typename T>                     \
    TESSERA_HD T operator()(T x) const {      \
      using std::FN;                          \
      return EXPR;                            \
    }                                         \
  };

TESSERA_MATH_FUNCTOR(Exp, exp, exp(x))
TESSERA_MATH_FUNCTOR(Sqrt, sqrt, sqrt(x))
TESSERA_MATH_FUNCTOR(Rsqrt, sqrt, T(1) / sqrt(x))
TESSERA_MATH_FUNCTOR(Sin, sin, sin(x))
TESSERA_MATH_FUNCTOR(Cos, cos, cos(x))
TESSERA_MATH_FUNCTOR(Tan, tan, tan(x))
TESSERA_MATH_FUNCTOR(ArcSin, asin, asin(x))
TESSERA_MATH_FUNCTOR(ArcCos, acos, acos(x))
TESSERA_MATH_FUNCTOR(ArcTan, atan, atan(x))
TESSERA_MATH_FUNCTOR(Sinh, sinh, sinh(x))
TESSERA_MATH_FUNCTOR(Cosh, cosh, cosh(x))
TESSERA_MATH_FUNCTOR(Tanh, tanh, tanh(x))
TESSERA_MATH_FUNCTOR(ArcSinh, asinh, asinh(x))
TESSERA_MATH_FUNCTOR(ArcCosh, acosh, acosh(x))
TESSERA_MATH_FUNCTOR(ArcTanh, atanh, atanh(x))
TESSERA_MATH_FUNCTOR(Log, log, log(x))
TESSERA_MATH_FUNCTOR(Log10, log10, log10(x))
TESSERA_MATH_FUNCTOR(Sigmoid, exp, T(1) / (T(1) + exp(-x)))
#undef TESSERA_MATH_FUNCTOR

struct Expm1 : OnInexact {
  template <typename T>
  TESSERA_HD T operator()(T x) const {
    using std::exp;
    if constexpr (detail::is_cx<T>) return exp(x) - T(1);
    else return std::expm1(x);
  }
};

struct Log2 : OnInexact {
  template <typename T>
  TESSERA_HD T operator()(T x) const {
    using std::log;
    if constexpr (detail::is_cx<T>) return log(x) / 0.69314718055994530942f;
    else return std::log2(x);
  }
};

struct Log1p : OnInexact {
  template <typename T>
  TESSERA_HD T operator()(T x) const {
    using std::log;
    if constexpr (detail::is_cx<T>) return log(T(1) + x);
    else return std::log1p(x);
  }
};

struct Degrees : OnFloating {
  template <typename T>
  TESSERA_HD T operator()(T x) const {
    return x * T(57.295779513082320877);
  }
};

struct Radians : OnFloating {
  template <typename T>
  TESSERA_HD T operator()(T x) const {
    return x * T(0.017453292519943295770);
  }
};

struct Erf : OnFloating {
  template <typename T>
  TESSERA_HD T operator()(T x) const {
    return std::erf(x);
  }
};

// float64 through the double-precision inverse; every narrower type through
// MLX's float32 polynomial in log(1 - x^2) (two branches, at most 2.4 ulp
// from the true value), so that erfinv and the normal samplers built on it
// give MLX's numbers.
struct ErfInv : OnFloating {
  template <typename T>
  TESSERA_HD T operator()(T x) const {
    if constexpr (std::is_same_v<T, double>) {
#ifdef __CUDA_ARCH__
      return ::erfinv(x);
#else
      return detail::erfinv(x);
#endif
    } else {
      return static_cast<T>(erfinv_f32(static_cast<float>(x)));
    }
  }

  static TESSERA_HD float erfinv_f32(float a) {
    using std::fma;
    using std::log;
    float t = log(fma(a, 0.0f - a, 1.0f));
    float p;
    if ((t < 0 ? -t : t) > 6.125f) {
      p = 3.03697567e-10f;
      p = fma(p, t, 2.93243101e-8f);
      p = fma(p, t, 1.22150334e-6f);
      p = fma(p, t, 2.84108955e-5f);
      p = fma(p, t, 3.93552968e-4f);
      p = fma(p, t, 3.02698812e-3f);
      p = fma(p, t, 4.83185798e-3f);
      p = fma(p, t, -2.64646143e-1f);
      p = fma(p, t, 8.40016484e-1f);
    } else {
      p = 5.43877832e-9f;
      p = fma(p, t, 1.43285448e-7f);
      p = fma(p, t, 1.22774793e-6f);
      p = fma(p, t, 1.12963626e-7f);
      p = fma(p, t, -5.61530760e-5f);
      p = fma(p, t, -1.47697632e-4f);
      p = fma(p, t, 2.31468678e-3f);
      p = fma(p, t, 1.15392581e-2f);
      p = fma(p, t, -2.32015476e-1f);
      p = fma(p, t, 8.86226892e-1f);
    }
    return a * p;
  }
};

struct Conjugate : OnAll {
  template <typename T>
  TESSERA_HD T operator()(T x) const {
    if constexpr (detail::is_cx<T>) return T(x.real(), -x.imag());
    else return x;
  }
};

struct Real : OnAll {
  template <typename T>
  TESSERA_HD auto operator()(T x) const {
    if constexpr (detail::is_cx<T>) return x.real();
    else return x;
  }
};

struct Imag : OnAll {
  template <typename T>
  TESSERA_HD auto operator()(T x) const {
    if constexpr (detail::is_cx<T>) return x.imag();
    else return T(0);
  }
};

struct BitwiseInvert : OnIntegersAndBool {
  template <typename T>
  TESSERA_HD T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) return !x;
    else return T(~x);
  }
};

struct IsNan : OnAll {
  template <typename T>
  TESSERA_HD bool operator()(T x) const {
    return detail::is_nan(x);
  }
};

struct IsInf : OnAll {
  template <typename T>
  TESSERA_HD bool operator()(T x) const {
    if constexpr (detail::is_cx<T>) return std::isinf(x.real()) || std::isinf(x.imag());
    else if constexpr (std::is_floating_point_v<T>) return std::isinf(x);
    else return false;
  }
};

struct IsFinite : OnAll {
  template <typename T>
  TESSERA_HD bool operator()(T x) const {
    if constexpr (detail::is_cx<T>) return std::isfinite(x.real()) && std::isfinite(x.imag());
    else if constexpr (std::is_floating_point_v<T>) return std::isfinite(x);
    else return true;
  }
};

struct IsPosInf : OnReal {
  template <typename T>
  TESSERA_HD bool operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return x == std::numeric_limits<T>::infinity();
    else return false;
  }
};

struct IsNegInf : OnReal {
  template <typename T>
  TESSERA_HD bool operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return x == -std::numeric_limits<T>::infinity();
    else return false;
  }
};

// Replacements are given in double; the kernel fills in the dtype's defaults.
struct NanToNum : OnInexact {
  double nan, posinf, neginf;
  template <typename T>
  TESSERA_HD T operator()(T x) const {
    if constexpr (detail::is_cx<T>) {
      return T(replace(x.real()), replace(x.imag()));
    } else {
      return replace(x);
    }
  }
  template <typename F>
  TESSERA_HD F replace(F x) const {
    if (std::isnan(x)) return static_cast<F>(nan);
    if (std::isinf(x)) return static_cast<F>(x > 0 ? posinf : neginf);
    return x;
  }
};

// ---- binary -----------------------------------------------------------------

struct Add : OnAll {
  template <typename T>
  TESSERA_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return a || b;
    } else {
      using U = detail::wrap_t<T>;
      return T(U(a) + U(b));
    }
  }
};

struct Subtract : OnNumbers {
  template <typename T>
  TESSERA_HD T operator()(T a, T b) const {
    using U = detail::wrap_t<T>;
    return T(U(a) - U(b));
  }
};

struct Multiply : OnAll {
  template <typename T>
  TESSERA_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return a && b;
    } else {
      using U = detail::wrap_t<T>;
      return T(U(a) * U(b));
    }
  }
};

struct Divide : OnInexact {
  template <typename T>
  TESSERA_HD T operator()(T a, T b) const {
    return a / b;
  }
};

// Floats: floor(a / b). Integers: the floor of the quotient, see Note
// [Integer semantics].
struct FloorDivide : OnReal {
  template <typename T>
  TESSERA_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return a && b;
    } else if constexpr (std::is_integral_v<T>) {
      if (b == 0) return T(0);
      if constexpr (std::is_signed_v<T>) {
        if (b == T(-1)) return Negative{}(a);
        const T q = T(a / b);
        return (T(a % b) != 0 && ((a < 0) != (b < 0))) ? T(q - 1) : q;
      } else {
        return T(a / b);
      }
    } else {
      return std::floor(a / b);
    }
  }
};

// The remainder with the sign of the divisor (Python).
struct Remainder : OnReal {
  template <typename T>
  TESSERA_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return false;
    } else if constexpr (std::is_integral_v<T>) {
      if (b == 0) return T(0);
      if constexpr (std::is_signed_v<T>) {
        if (b == T(-1)) return T(0);
        T r = T(a % b);
        return (r != 0 && ((r < 0) != (b < 0))) ? T(r + b) : r;
      } else {
        return T(a % b);
      }
    } else {
      T r = std::fmod(a, b);
      return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
    }
  }
};

struct Power : OnAll {
  template <typename T>
  TESSERA_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return a || !b;
    } else if constexpr (std::is_integral_v<T>) {
      if constexpr (std::is_signed_v<T>) {
        if (b < 0) return T(0);
      }
      using U = detail::wrap_t<T>;
      U result = 1, base = U(a);
      for (T e = b; e != 0; e >>= 1) {
        if (e & 1) result = U(result * base);
        base = U(base * base);
      }
      return T(result);
    } else if constexpr (detail::is_cx<T>) {
      if (b == T(0)) return T(1);
      using std::pow;
      return pow(a, b);
    } else {
      // Squares, and float32 cubes (x ** 3 of tanh-GELU), multiply: std::pow
      // costs about 16 times as much. a * a is the correctly rounded square; a
      // float's cube is exact in double but for one rounding, so it rounds as
      // the correctly rounded cube but for double-rounding ties.
      if (b == T(2)) return a * a;
      if constexpr (std::is_same_v<T, float>) {
        if (b == 3.f) {
          const double d = a;
          return static_cast<float>(d * d * d);
        }
      }
      return std::pow(a, b);
    }
  }
};

struct Maximum : OnAll {
  template <typename T>
  TESSERA_HD T operator()(T a, T b) const {
    if (detail::is_nan(a)) return a;
    return detail::less(b, a) ? a : b;
  }
};

struct Minimum : OnAll {
  template <typename T>
  TESSERA_HD T operator()(T a, T b) const {
    if (detail::is_nan(a)) return a;
    return detail::less(a, b) ? a : b;
  }
};

struct LogAddExp : OnFloating {
  template <typename T>
  TESSERA_HD T operator()(T a, T b) const {
    if (a == b) return a + T(0.69314718055994530942);  // also +-inf
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    T m = a > b ? a : b;
    return m + std::log1p(std::exp(-std::abs(a - b)));
  }
};

struct ArcTan2 : OnFloating {
  template <typename T>
  TESSERA_HD T operator()(T a, T b) const {
    return std::atan2(a, b);
  }
};

struct Hypot : OnFloating {
  template <typename T>
  TESSERA_HD T operator()(T a, T b) const {
    return std::hypot(a, b);
  }
};

struct Equal : OnAll {
  template <typename T>
  TESSERA_HD bool operator()(T a, T b) const {
    return a == b;
  }
};

// Equal, with NaN equal to NaN (array_equal(equal_nan=true)).
struct EqualNan : OnAll {
  template <typename T>
  TESSERA_HD bool operator()(T a, T b) const {
    return a == b || (detail::is_nan(a) && detail::is_nan(b));
  }
};

struct NotEqual : OnAll {
  template <typename T>
  TESSERA_HD bool operator()(T a, T b) const {
    return a != b;
  }
};

struct Less : OnAll {
  template <typename T>
  TESSERA_HD bool operator()(T a, T b) const {
    return detail::less(a, b);
  }
};

struct LessEqual : OnAll {
  template <typename T>
  TESSERA_HD bool operator()(T a, T b) const {
    return detail::less(a, b) || a == b;
  }
};

struct Greater : OnAll {
  template <typename T>
  TESSERA_HD bool operator()(T a, T b) const {
    return detail::less(b, a);
  }
};

struct GreaterEqual : OnAll {
  template <typename T>
  TESSERA_HD bool operator()(T a, T b) const {
    return detail::less(b, a) || a == b;
  }
};

struct LogicalAnd : OnAll {
  template <typename T>
  TESSERA_HD bool operator()(T a, T b) const {
    return detail::truthy(a) && detail::truthy(b);
  }
};

struct LogicalOr : OnAll {
  template <typename T>
  TESSERA_HD bool operator()(T a, T b) const {
    return detail::truthy(a) || detail::truthy(b);
  }
};

struct LogicalXor : OnAll {
  template <typename T>
  TESSERA_HD bool operator()(T a, T b) const {
    return detail::truthy(a) != detail::truthy(b);
  }
};

struct BitwiseAnd : OnIntegersAndBool {
  template <typename T>
  TESSERA_HD T operator()(T a, T b) const {
    return T(a & b);
  }
};

struct BitwiseOr : OnIntegersAndBool {
  template <typename T>
  TESSERA_HD T operator()(T a, T b) const {
    return T(a | b);
  }
};

struct BitwiseXor : OnIntegersAndBool {
  template <typename T>
  TESSERA_HD T operator()(T a, T b) const {
    return T(a ^ b);
  }
};

struct LeftShift : OnIntegers {
  template <typename T>
  TESSERA_HD T operator()(T a, T b) const {
    constexpr T bits = T(sizeof(T) * 8);
    if constexpr (std::is_signed_v<T>) {
      if (b < 0) return T(0);
    }
    if (b >= bits) return T(0);
    using U = detail::wrap_t<T>;
    return T(U(a) << b);
  }
};

struct RightShift : OnIntegers {
  template <typename T>
  TESSERA_HD T operator()(T a, T b) const {
    constexpr T bits = T(sizeof(T) * 8);
    bool out_of_range = b >= bits;
    if constexpr (std::is_signed_v<T>) out_of_range = out_of_range || b < 0;
    if (out_of_range) {
      if constexpr (std::is_signed_v<T>) return a < 0 ? T(-1) : T(0);
      else return T(0);
    }
    return T(a >> b);
  }
};

// |a - b| <= atol + rtol * |b| in double; equal values (and same-sign
// infinities) are close; NaN is close to NaN only with equal_nan.
struct IsClose : OnAll {
  double rtol, atol;
  bool equal_nan;
  template <typename T>
  TESSERA_HD bool operator()(T a, T b) const {
    if constexpr (detail::is_cx<T>) {
      double xr = a.real(), xi = a.imag(), yr = b.real(), yi = b.imag();
      if (xr == yr && xi == yi) return true;
      if (detail::is_nan(a) || detail::is_nan(b)) {
        return equal_nan && detail::is_nan(a) && detail::is_nan(b);
      }
      if (IsInf{}(a) || IsInf{}(b)) return false;
      return std::hypot(xr - yr, xi - yi) <= atol + rtol * std::hypot(yr, yi);
    } else {
      double x = static_cast<double>(a), y = static_cast<double>(b);
      if (x == y) return true;
      if (std::isnan(x) || std::isnan(y)) return equal_nan && std::isnan(x) && std::isnan(y);
      if (std::isinf(x) || std::isinf(y)) return false;
      return std::abs(x - y) <= atol + rtol * std::abs(y);
    }
  }
};

}  // namespace tessera::scalar
