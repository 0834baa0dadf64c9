// Element types, their categories and the promotion rules of the reference.
//
//   Dtype t = promote_types(int8, uint8);   // int16
//   issubdtype(t, integer);                  // true
#pragma once

#include <complex>
#include <cstdint>
#include <ostream>
#include <string>
#include <type_traits>

#include "tessera/core/half.h"

namespace tessera {

using complex64_t = std::complex<float>;

struct Dtype {
  // Order matters: it indexes the promotion table.
  enum class Val : uint8_t {
    bool_,
    uint8,
    uint16,
    uint32,
    uint64,
    int8,
    int16,
    int32,
    int64,
    float16,
    bfloat16,
    float32,
    float64,
    complex64,
  };
  static constexpr int num_types = 14;

  // NumPy-style kind character: b, u, i, f, V (bfloat16), c.
  enum class Kind : char { b = 'b', u = 'u', i = 'i', f = 'f', V = 'V', c = 'c' };

  Val val;
  uint8_t size;

  constexpr Dtype(Val v, uint8_t s) : val(v), size(s) {}
  constexpr bool operator==(const Dtype& o) const { return val == o.val; }
  constexpr bool operator!=(const Dtype& o) const { return val != o.val; }
};

inline constexpr Dtype bool_{Dtype::Val::bool_, 1};
inline constexpr Dtype uint8{Dtype::Val::uint8, 1};
inline constexpr Dtype uint16{Dtype::Val::uint16, 2};
inline constexpr Dtype uint32{Dtype::Val::uint32, 4};
inline constexpr Dtype uint64{Dtype::Val::uint64, 8};
inline constexpr Dtype int8{Dtype::Val::int8, 1};
inline constexpr Dtype int16{Dtype::Val::int16, 2};
inline constexpr Dtype int32{Dtype::Val::int32, 4};
inline constexpr Dtype int64{Dtype::Val::int64, 8};
inline constexpr Dtype float16{Dtype::Val::float16, 2};
inline constexpr Dtype bfloat16{Dtype::Val::bfloat16, 2};
inline constexpr Dtype float32{Dtype::Val::float32, 4};
inline constexpr Dtype float64{Dtype::Val::float64, 8};
inline constexpr Dtype complex64{Dtype::Val::complex64, 8};

// All dtypes, in promotion-table order.
inline constexpr Dtype all_dtypes[Dtype::num_types] = {
    bool_, uint8, uint16, uint32, uint64, int8, int16,
    int32, int64, float16, bfloat16, float32, float64, complex64};

enum class Category {
  complexfloating,
  floating,
  inexact,
  signedinteger,
  unsignedinteger,
  integer,
  number,
  generic,
};
inline constexpr Category complexfloating = Category::complexfloating;
inline constexpr Category floating = Category::floating;
inline constexpr Category inexact = Category::inexact;
inline constexpr Category signedinteger = Category::signedinteger;
inline constexpr Category unsignedinteger = Category::unsignedinteger;
inline constexpr Category integer = Category::integer;
inline constexpr Category number = Category::number;
inline constexpr Category generic = Category::generic;

Dtype promote_types(const Dtype& a, const Dtype& b);
Dtype::Kind kindof(const Dtype& t);

bool issubdtype(const Dtype& a, const Dtype& b);
bool issubdtype(const Dtype& a, const Category& b);
bool issubdtype(const Category& a, const Dtype& b);
bool issubdtype(const Category& a, const Category& b);

inline bool is_floating_point(Dtype t) {
  return t == float16 || t == bfloat16 || t == float32 || t == float64;
}
inline bool is_complex(Dtype t) { return t == complex64; }
inline bool is_inexact(Dtype t) { return is_floating_point(t) || is_complex(t); }
inline bool is_unsigned(Dtype t) {
  return t == uint8 || t == uint16 || t == uint32 || t == uint64;
}
inline bool is_signed_integer(Dtype t) {
  return t == int8 || t == int16 || t == int32 || t == int64;
}
inline bool is_integer(Dtype t) { return is_unsigned(t) || is_signed_integer(t); }

// The dtype of sum/prod over t: narrow integers widen, bool becomes int32.
Dtype accumulation_type(Dtype t);
// The dtype of "float-out" ops over t: inexact kept, everything else float32.
Dtype inexact_type(Dtype t);

// "float32", "bool", ... (NumPy names).
std::string dtype_name(Dtype t);
// The C++ name of the stored type of bool, integer, float32 and float64 t
// ("bool", "int32_t", "double"), for generated source; nullptr for the 16-bit
// floats and complex64, which each generated source names its own way.
const char* c_type_name(Dtype t);
std::ostream& operator<<(std::ostream& os, const Dtype& t);

template <typename T>
struct TypeToDtype;
template <> struct TypeToDtype<bool> { static constexpr Dtype value = bool_; };
template <> struct TypeToDtype<uint8_t> { static constexpr Dtype value = uint8; };
template <> struct TypeToDtype<uint16_t> { static constexpr Dtype value = uint16; };
template <> struct TypeToDtype<uint32_t> { static constexpr Dtype value = uint32; };
template <> struct TypeToDtype<uint64_t> { static constexpr Dtype value = uint64; };
template <> struct TypeToDtype<int8_t> { static constexpr Dtype value = int8; };
template <> struct TypeToDtype<int16_t> { static constexpr Dtype value = int16; };
template <> struct TypeToDtype<int32_t> { static constexpr Dtype value = int32; };
template <> struct TypeToDtype<int64_t> { static constexpr Dtype value = int64; };
template <> struct TypeToDtype<float16_t> { static constexpr Dtype value = float16; };
template <> struct TypeToDtype<bfloat16_t> { static constexpr Dtype value = bfloat16; };
template <> struct TypeToDtype<float> { static constexpr Dtype value = float32; };
// C++ rule of the reference: a double scalar becomes float32 (see cpp.md).
template <> struct TypeToDtype<double> { static constexpr Dtype value = float32; };
template <> struct TypeToDtype<complex64_t> { static constexpr Dtype value = complex64; };
// long / unsigned long where they differ from int64_t / uint64_t.
template <> struct TypeToDtype<long long> { static constexpr Dtype value = int64; };
template <> struct TypeToDtype<unsigned long long> { static constexpr Dtype value = uint64; };

template <typename T>
inline constexpr Dtype dtype_of = TypeToDtype<std::remove_cv_t<T>>::value;

// finfo / iinfo, reported in double / 64-bit integers.
struct finfo {
  explicit finfo(Dtype t);
  Dtype dtype;
  int bits;
  double min, max, eps, smallest_normal;
};
struct iinfo {
  explicit iinfo(Dtype t);
  Dtype dtype;
  int bits;
  int64_t min;
  uint64_t max;
};

}  // namespace tessera
