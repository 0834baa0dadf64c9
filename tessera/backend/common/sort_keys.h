// Unsigned keys whose order is NumPy's sort order (Note [Sort order]), for the
// sort kernels of both backends: SortKey<T>::encode(x) < encode(y) exactly when
// x sorts before y; every NaN maps to the largest key, -0.0 just below +0.0;
// decode(encode(x)) == x except that NaNs come back as one NaN.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tessera/core/dtype.h"

#if defined(__CUDACC__)
#define TESSERA_HD_INLINE __host__ __device__ __forceinline__
#else
#define TESSERA_HD_INLINE inline
#endif

namespace tessera {

template <int Bytes>
struct UnsignedOf;
template <> struct UnsignedOf<1> { using type = uint8_t; };
template <> struct UnsignedOf<2> { using type = uint16_t; };
template <> struct UnsignedOf<4> { using type = uint32_t; };
template <> struct UnsignedOf<8> { using type = uint64_t; };

// Float-like bit patterns of B bytes with `ExpMask` the exponent bits.
template <typename K, K ExpMask, K ManMask>
struct FloatBits {
  static constexpr K kSign = K(K(1) << (8 * sizeof(K) - 1));
  static TESSERA_HD_INLINE K encode_bits(K b) {
    if ((b & ExpMask) == ExpMask && (b & ManMask) != 0) return K(~K(0));  // NaN
    return (b & kSign) ? K(~b) : K(b | kSign);
  }
  static TESSERA_HD_INLINE K decode_bits(K k) { return (k & kSign) ? K(k ^ kSign) : K(~k); }
};

// T: a host element type, or a device type of the same size and layout
// (the device's __half / __nv_bfloat16 go through Half16 below).
template <typename T, typename Enable = void>
struct SortKey {
  using K = typename UnsignedOf<sizeof(T)>::type;
  static TESSERA_HD_INLINE K encode(T x) {
    if constexpr (std::is_same_v<T, bool>) {
      return K(x ? 1 : 0);
    } else if constexpr (std::is_signed_v<T> && std::is_integral_v<T>) {
      return K(K(x) ^ K(K(1) << (8 * sizeof(K) - 1)));
    } else if constexpr (std::is_integral_v<T>) {
      return K(x);
    } else if constexpr (std::is_same_v<T, float>) {
      K b;
      memcpy(&b, &x, sizeof(b));
      return FloatBits<K, 0x7f800000u, 0x007fffffu>::encode_bits(b);
    } else {
      static_assert(std::is_same_v<T, double>, "SortKey: unsupported type");
      K b;
      memcpy(&b, &x, sizeof(b));
      return FloatBits<K, 0x7ff0000000000000ull, 0x000fffffffffffffull>::encode_bits(b);
    }
  }
  static TESSERA_HD_INLINE T decode(K k) {
    if constexpr (std::is_same_v<T, bool>) {
      return k != 0;
    } else if constexpr (std::is_signed_v<T> && std::is_integral_v<T>) {
      return T(K(k ^ K(K(1) << (8 * sizeof(K) - 1))));
    } else if constexpr (std::is_integral_v<T>) {
      return T(k);
    } else if constexpr (std::is_same_v<T, float>) {
      K b = FloatBits<K, 0x7f800000u, 0x007fffffu>::decode_bits(k);
      T x;
      memcpy(&x, &b, sizeof(b));
      return x;
    } else {
      K b = FloatBits<K, 0x7ff0000000000000ull, 0x000fffffffffffffull>::decode_bits(k);
      T x;
      memcpy(&x, &b, sizeof(b));
      return x;
    }
  }
};

// 16-bit floats, by their bits: float16 (5 exponent bits) or bfloat16 (8).
template <typename T, bool Brain>
struct Half16Key {
  using K = uint16_t;
  using Bits = std::conditional_t<Brain, FloatBits<K, 0x7f80, 0x007f>, FloatBits<K, 0x7c00, 0x03ff>>;
  static TESSERA_HD_INLINE K encode(T x) {
    K b;
    memcpy(&b, &x, sizeof(b));
    return Bits::encode_bits(b);
  }
  static TESSERA_HD_INLINE T decode(K k) {
    K b = Bits::decode_bits(k);
    T x;
    memcpy(&x, &b, sizeof(b));
    return x;
  }
};
template <>
struct SortKey<float16_t> : Half16Key<float16_t, false> {};
template <>
struct SortKey<bfloat16_t> : Half16Key<bfloat16_t, true> {};

}  // namespace tessera
