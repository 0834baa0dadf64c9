// The text that every generated kernel starts with (backend/cuda/fused_source.cpp):
// what the scalar functors (backend/common/elementwise.h, which follows it)
// take from the C++ and CUDA headers, so that NVRTC needs no header at run
// time, then, after the functors, the loads, stores and casts of the fused
// kernels.
//
// The standard names are defined for the types the functors meet on the
// device: bool, the integers, float and double (complex values are not fused
// on the GPU). Math goes to the CUDA math library that NVRTC provides
// (expf for float, exp for double), as in the unfused kernels.
#pragma once

namespace tessera::gpu {

inline constexpr const char* kJitPrelude = R"prelude(
#define TESSERA_HD __host__ __device__
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long uint64_t;
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long int64_t;

namespace std {
template <class T, T v> struct integral_constant { static constexpr T value = v; };
typedef integral_constant<bool, true> true_type;
typedef integral_constant<bool, false> false_type;
template <class A, class B> struct is_same : false_type {};
template <class A> struct is_same<A, A> : true_type {};
template <class A, class B> inline constexpr bool is_same_v = is_same<A, B>::value;
template <bool C, class A, class B> struct conditional { typedef A type; };
template <class A, class B> struct conditional<false, A, B> { typedef B type; };
template <bool C, class A, class B> using conditional_t = typename conditional<C, A, B>::type;
template <class T> struct is_integral : false_type {};
#define TESSERA_INTEGRAL(T) template <> struct is_integral<T> : true_type {};
TESSERA_INTEGRAL(bool) TESSERA_INTEGRAL(char) TESSERA_INTEGRAL(signed char)
TESSERA_INTEGRAL(unsigned char) TESSERA_INTEGRAL(short) TESSERA_INTEGRAL(unsigned short)
TESSERA_INTEGRAL(int) TESSERA_INTEGRAL(unsigned) TESSERA_INTEGRAL(long)
TESSERA_INTEGRAL(unsigned long) TESSERA_INTEGRAL(long long) TESSERA_INTEGRAL(unsigned long long)
#undef TESSERA_INTEGRAL
template <class T> inline constexpr bool is_integral_v = is_integral<T>::value;
template <class T> inline constexpr bool is_floating_point_v = is_same_v<T, float> || is_same_v<T, double>;
template <class T> inline constexpr bool is_signed_v = (is_integral_v<T> || is_floating_point_v<T>) && T(-1) < T(0);
template <class T> inline constexpr bool is_unsigned_v = is_integral_v<T> && !(T(-1) < T(0));
template <class T> struct make_unsigned;
template <> struct make_unsigned<signed char> { typedef unsigned char type; };
template <> struct make_unsigned<unsigned char> { typedef unsigned char type; };
template <> struct make_unsigned<short> { typedef unsigned short type; };
template <> struct make_unsigned<unsigned short> { typedef unsigned short type; };
template <> struct make_unsigned<int> { typedef unsigned type; };
template <> struct make_unsigned<unsigned> { typedef unsigned type; };
template <> struct make_unsigned<long> { typedef unsigned long type; };
template <> struct make_unsigned<unsigned long> { typedef unsigned long type; };
template <> struct make_unsigned<long long> { typedef unsigned long long type; };
template <> struct make_unsigned<unsigned long long> { typedef unsigned long long type; };
template <class T> using make_unsigned_t = typename make_unsigned<T>::type;

template <class T> struct numeric_limits {
  static __device__ T lowest() { return is_signed_v<T> ? T(T(1) << (sizeof(T) * 8 - 1)) : T(0); }
  static __device__ T max() { return T(~lowest()); }
};
template <> struct numeric_limits<bool> {
  static __device__ bool lowest() { return false; }
  static __device__ bool max() { return true; }
};
template <> struct numeric_limits<float> {
  static __device__ float lowest() { return -3.402823466e+38f; }
  static __device__ float max() { return 3.402823466e+38f; }
  static __device__ float infinity() { return __int_as_float(0x7f800000); }
  static __device__ float quiet_NaN() { return __int_as_float(0x7fc00000); }
};
template <> struct numeric_limits<double> {
  static __device__ double lowest() { return -1.7976931348623157e+308; }
  static __device__ double max() { return 1.7976931348623157e+308; }
  static __device__ double infinity() { return __longlong_as_double(0x7ff0000000000000ll); }
  static __device__ double quiet_NaN() { return __longlong_as_double(0x7ff8000000000000ll); }
};

#define TESSERA_MATH1(F) \
  __device__ inline float F(float x) { return ::F##f(x); } \
  __device__ inline double F(double x) { return ::F(x); }
#define TESSERA_MATH2(F) \
  __device__ inline float F(float x, float y) { return ::F##f(x, y); } \
  __device__ inline double F(double x, double y) { return ::F(x, y); }
TESSERA_MATH1(exp) TESSERA_MATH1(expm1) TESSERA_MATH1(log) TESSERA_MATH1(log2)
TESSERA_MATH1(log10) TESSERA_MATH1(log1p) TESSERA_MATH1(sqrt) TESSERA_MATH1(sin)
TESSERA_MATH1(cos) TESSERA_MATH1(tan) TESSERA_MATH1(asin) TESSERA_MATH1(acos)
TESSERA_MATH1(atan) TESSERA_MATH1(sinh) TESSERA_MATH1(cosh) TESSERA_MATH1(tanh)
TESSERA_MATH1(asinh) TESSERA_MATH1(acosh) TESSERA_MATH1(atanh) TESSERA_MATH1(erf)
TESSERA_MATH1(floor) TESSERA_MATH1(ceil) TESSERA_MATH1(trunc) TESSERA_MATH1(nearbyint)
TESSERA_MATH2(pow) TESSERA_MATH2(fmod) TESSERA_MATH2(atan2) TESSERA_MATH2(hypot)
TESSERA_MATH2(copysign)
#undef TESSERA_MATH1
#undef TESSERA_MATH2
__device__ inline float abs(float x) { return ::fabsf(x); }
__device__ inline double abs(double x) { return ::fabs(x); }
__device__ inline float fma(float x, float y, float z) { return ::fmaf(x, y, z); }
__device__ inline double fma(double x, double y, double z) { return ::fma(x, y, z); }
template <class T> __device__ inline bool isnan(T x) { return x != x; }
template <class T> __device__ inline bool isinf(T x) {
  return x == numeric_limits<T>::infinity() || x == -numeric_limits<T>::infinity();
}
template <class T> __device__ inline bool isfinite(T x) { return !isnan(x) && !isinf(x); }
}  // namespace std

namespace cuda { namespace std { template <class T> class complex; } }

namespace tessera {
struct complex64_t;
template <class T> inline constexpr bool is_complex_v = std::is_same_v<T, complex64_t>;
template <class T> inline constexpr bool is_integral_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;
}  // namespace tessera
)prelude";

// After the functors: element types, conversions and the steps of a fused
// program, with the rules of the unfused kernels (Note [Fused programs] in
// ops/primitives/compiled.h).
inline constexpr const char* kJitEpilogue = R"epilogue(
namespace tessera::jit {

struct half { unsigned short bits; };
struct bfloat16 { unsigned short bits; };

template <class T> struct Compute { typedef T type; };
template <> struct Compute<half> { typedef float type; };
template <> struct Compute<bfloat16> { typedef float type; };
template <class T> using compute_t = typename Compute<T>::type;

__device__ inline float widen(half h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
}
__device__ inline float widen(bfloat16 b) { return __uint_as_float(unsigned(b.bits) << 16); }
template <class T> __device__ inline T widen(T x) { return x; }

// Round to nearest even, as __float2half_rn and __float2bfloat16_rn.
template <class T> __device__ inline T narrow(compute_t<T> x) {
  if constexpr (std::is_same_v<T, half>) {
    half h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(x));
    return h;
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    unsigned u = __float_as_uint(x);
    if (x != x) return bfloat16{static_cast<unsigned short>((u >> 16) | 0x40)};
    u += 0x7fffu + ((u >> 16) & 1u);
    return bfloat16{static_cast<unsigned short>(u >> 16)};
  } else {
    return x;
  }
}

// A functor on stored operands; a result of their compute type is stored in
// their type, any other result as it is.
template <class Op, class In>
__device__ inline auto step(const Op& op, In a) {
  auto r = op(widen(a));
  if constexpr (std::is_same_v<decltype(r), compute_t<In>>) return narrow<In>(r);
  else return r;
}
template <class Op, class In>
__device__ inline auto step(const Op& op, In a, In b) {
  auto r = op(widen(a), widen(b));
  if constexpr (std::is_same_v<decltype(r), compute_t<In>>) return narrow<In>(r);
  else return r;
}
template <class Op, class In>
__device__ inline auto step(In a) { return step(Op{}, a); }
template <class Op, class In>
__device__ inline auto step(In a, In b) { return step(Op{}, a, b); }

// float_to_int of core/dispatch.h: NaN to 0, out-of-range values clamped.
template <class Out, class F>
__device__ inline Out float_to_int(F f) {
  if (f != f) return Out(0);
  if (f <= static_cast<F>(std::numeric_limits<Out>::lowest())) return std::numeric_limits<Out>::lowest();
  if (f >= static_cast<F>(std::numeric_limits<Out>::max())) return std::numeric_limits<Out>::max();
  return static_cast<Out>(f);
}

// cast_to of core/dispatch.h (NumPy's rules) on the device types.
template <class Out, class In>
__device__ inline Out cast(In v) {
  if constexpr (std::is_same_v<Out, In>) {
    return v;
  } else if constexpr (std::is_same_v<Out, bool>) {
    return widen(v) != 0;
  } else if constexpr (std::is_same_v<Out, half> || std::is_same_v<Out, bfloat16>) {
    return narrow<Out>(static_cast<float>(widen(v)));
  } else if constexpr (std::is_integral_v<Out> &&
                       (std::is_floating_point_v<In> || std::is_same_v<In, half> ||
                        std::is_same_v<In, bfloat16>)) {
    typedef typename std::conditional<std::is_same_v<In, double>, double, float>::type F;
    return float_to_int<Out>(static_cast<F>(widen(v)));
  } else {
    return static_cast<Out>(widen(v));
  }
}

// The element offset of flat index i over shape (ND dimensions) and strides.
template <int ND>
__device__ inline long long loc(long long i, const int* shape, const long long* strides) {
  long long l = 0;
  if (i <= 0x7fffffffll) {
    unsigned u = static_cast<unsigned>(i);
#pragma unroll
    for (int d = ND - 1; d >= 0; --d) {
      unsigned e = static_cast<unsigned>(shape[d]);
      unsigned q = u / e;
      l += static_cast<long long>(u - q * e) * strides[d];
      u = q;
    }
    return l;
  }
#pragma unroll
  for (int d = ND - 1; d >= 0; --d) {
    l += (i % shape[d]) * strides[d];
    i /= shape[d];
  }
  return l;
}

}  // namespace tessera::jit
)epilogue";

}  // namespace tessera::gpu
