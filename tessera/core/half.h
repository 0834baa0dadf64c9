// float16_t and bfloat16_t: 16-bit storage types that compute in float.
//
//   float16_t h = 1.5f;          // round to nearest even
//   float f = h + h;             // arithmetic promotes to float
#pragma once

#include <cstdint>
#include <cstring>

namespace tessera {

namespace detail {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t float_to_half_bits(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mag = x & 0x7fffffffu;
  if (mag >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u : 0u));
  }
  if (mag >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    return static_cast<uint16_t>(sign | 0x7c00u);
  }
  if (mag < 0x38800000u) {  // subnormal half (or zero)
    // Add 0.5 so the float adder does the round-to-nearest-even for us.
    float v = bits_float(mag) + 0.5f;
    return static_cast<uint16_t>(sign | (float_bits(v) - 0x3f000000u));
  }
  uint32_t odd = (mag >> 13) & 1u;
  mag += 0xc8000fffu + odd;  // rebias exponent (-112 << 23) and round to nearest even
  return static_cast<uint16_t>(sign | (mag >> 13));
}

inline float half_bits_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    float v = static_cast<float>(man) * 5.9604644775390625e-8f;  // 2^-24
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112) << 23) | (man << 13));
}

inline uint16_t float_to_bf16_bits(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

inline float bf16_bits_to_float(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

}  // namespace detail

// A 16-bit float stored as its bits, converted through float with the
// format's two conversions.
template <uint16_t (*ToBits)(float), float (*FromBits)(uint16_t)>
struct Float16Storage {
  uint16_t bits;
  Float16Storage() = default;
  Float16Storage(float f) : bits(ToBits(f)) {}
  operator float() const { return FromBits(bits); }
  static Float16Storage from_bits(uint16_t b) {
    Float16Storage h;
    h.bits = b;
    return h;
  }
};

using float16_t = Float16Storage<detail::float_to_half_bits, detail::half_bits_to_float>;
using bfloat16_t = Float16Storage<detail::float_to_bf16_bits, detail::bf16_bits_to_float>;

static_assert(sizeof(float16_t) == 2 && sizeof(bfloat16_t) == 2);

}  // namespace tessera
