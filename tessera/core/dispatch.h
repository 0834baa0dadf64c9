// Dtype dispatch and element conversion, for the core and the host code of
// every backend (CUDA device code converts with gpu::cast_to, which shares
// float_to_int below).
//
//   dispatch_all(out.dtype(), [&](auto tag) {
//     using T = typename decltype(tag)::type;
//     ...  // one monomorphic loop over T
//   });
#pragma once

#include <cmath>
#include <complex>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tessera/core/dtype.h"

// Marks the functions that CUDA device code shares with the host.
#ifdef __CUDACC__
#define TESSERA_HD __host__ __device__
#else
#define TESSERA_HD
#endif

namespace tessera {

template <typename T>
struct TypeTag {
  using type = T;
};

template <typename T>
inline constexpr bool is_complex_v = std::is_same_v<T, complex64_t>;
template <typename T>
inline constexpr bool is_half_v =
    std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>;
template <typename T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_v<T>;
template <typename T>
inline constexpr bool is_integral_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// The type arithmetic on T is computed in: float for 16-bit floats, T otherwise.
template <typename T>
using compute_t = std::conditional_t<is_half_v<T>, float, T>;

// Float to integer: NaN and out-of-range values are undefined in C++; they are
// clamped to the destination range instead (NaN -> 0) so the result is defined.
template <typename Out, typename F>
TESSERA_HD inline Out float_to_int(F f) {
  if (f != f) return Out(0);
  if (f <= static_cast<F>(std::numeric_limits<Out>::lowest())) {
    return std::numeric_limits<Out>::lowest();
  }
  if (f >= static_cast<F>(std::numeric_limits<Out>::max())) {
    return std::numeric_limits<Out>::max();
  }
  return static_cast<Out>(f);
}

// Converts between element types with NumPy's rules (complex -> real keeps the
// real part; anything -> bool is "nonzero").
template <typename Out, typename In>
inline Out cast_to(In v) {
  if constexpr (std::is_same_v<Out, In>) {
    return v;
  } else if constexpr (std::is_same_v<Out, bool>) {
    if constexpr (is_complex_v<In>) {
      return v.real() != 0 || v.imag() != 0;
    } else {
      return static_cast<compute_t<In>>(v) != 0;
    }
  } else if constexpr (is_complex_v<In>) {
    return cast_to<Out>(v.real());
  } else if constexpr (is_complex_v<Out>) {
    return Out(static_cast<float>(static_cast<compute_t<In>>(v)), 0.0f);
  } else if constexpr (is_half_v<Out>) {
    return Out(static_cast<float>(static_cast<compute_t<In>>(v)));
  } else if constexpr (std::is_integral_v<Out> && is_float_v<In>) {
    using F = std::conditional_t<std::is_same_v<In, double>, double, float>;
    return float_to_int<Out>(static_cast<F>(v));
  } else {
    return static_cast<Out>(static_cast<compute_t<In>>(v));
  }
}

#define TESSERA_DTYPE_CASE(VAL, TYPE) \
  case Dtype::Val::VAL:               \
    return f(TypeTag<TYPE>{});

// Calls f(TypeTag<T>{}) for the C++ type T of dtype t.
template <typename F>
decltype(auto) dispatch_all(Dtype t, F&& f) {
  switch (t.val) {
    TESSERA_DTYPE_CASE(bool_, bool)
    TESSERA_DTYPE_CASE(uint8, uint8_t)
    TESSERA_DTYPE_CASE(uint16, uint16_t)
    TESSERA_DTYPE_CASE(uint32, uint32_t)
    TESSERA_DTYPE_CASE(uint64, uint64_t)
    TESSERA_DTYPE_CASE(int8, int8_t)
    TESSERA_DTYPE_CASE(int16, int16_t)
    TESSERA_DTYPE_CASE(int32, int32_t)
    TESSERA_DTYPE_CASE(int64, int64_t)
    TESSERA_DTYPE_CASE(float16, float16_t)
    TESSERA_DTYPE_CASE(bfloat16, bfloat16_t)
    TESSERA_DTYPE_CASE(float32, float)
    TESSERA_DTYPE_CASE(float64, double)
    TESSERA_DTYPE_CASE(complex64, complex64_t)
  }
  throw std::logic_error("[dispatch_all] unknown dtype (bug)");
}

// Same, restricted to dtypes of the same element size: one instantiation per
// width, for kernels that only move bytes (copies, gathers, transposes).
template <typename F>
decltype(auto) dispatch_bytes(Dtype t, F&& f) {
  switch (t.size) {
    case 1: return f(TypeTag<uint8_t>{});
    case 2: return f(TypeTag<uint16_t>{});
    case 4: return f(TypeTag<uint32_t>{});
    case 8: return f(TypeTag<uint64_t>{});
  }
  throw std::logic_error("[dispatch_bytes] unknown element size (bug)");
}

#undef TESSERA_DTYPE_CASE

// Calls f(TypeTag<I>{}) for an index dtype: int32, else int64 (the op
// functions cast every other integer index type to one of these).
template <typename F>
void dispatch_index(Dtype t, F&& f) {
  if (t == int32) {
    f(TypeTag<int32_t>{});
  } else {
    f(TypeTag<int64_t>{});
  }
}

// n contiguous elements of type src_t -> dst_t, on the calling thread (the CPU
// backend's cpu::cast_contiguous splits large casts over its threads).
void cast_contiguous(const void* src, Dtype src_t, void* dst, Dtype dst_t, size_t n);

}  // namespace tessera
