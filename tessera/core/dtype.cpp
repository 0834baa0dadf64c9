#include "tessera/core/dtype.h"

#include <limits>
#include <stdexcept>

namespace tessera {

namespace {

constexpr Dtype::Val kB = Dtype::Val::bool_, kU8 = Dtype::Val::uint8,
                     kU16 = Dtype::Val::uint16, kU32 = Dtype::Val::uint32,
                     kU64 = Dtype::Val::uint64, kI8 = Dtype::Val::int8,
                     kI16 = Dtype::Val::int16, kI32 = Dtype::Val::int32,
                     kI64 = Dtype::Val::int64, kF16 = Dtype::Val::float16,
                     kBF = Dtype::Val::bfloat16, kF32 = Dtype::Val::float32,
                     kF64 = Dtype::Val::float64, kC = Dtype::Val::complex64;

// The array-array promotion table of MLX.
constexpr Dtype::Val kPromotion[Dtype::num_types][Dtype::num_types] = {
    {kB, kU8, kU16, kU32, kU64, kI8, kI16, kI32, kI64, kF16, kBF, kF32, kF64, kC},
    {kU8, kU8, kU16, kU32, kU64, kI16, kI16, kI32, kI64, kF16, kBF, kF32, kF64, kC},
    {kU16, kU16, kU16, kU32, kU64, kI32, kI32, kI32, kI64, kF16, kBF, kF32, kF64, kC},
    {kU32, kU32, kU32, kU32, kU64, kI64, kI64, kI64, kI64, kF16, kBF, kF32, kF64, kC},
    {kU64, kU64, kU64, kU64, kU64, kF32, kF32, kF32, kF32, kF16, kBF, kF32, kF64, kC},
    {kI8, kI16, kI32, kI64, kF32, kI8, kI16, kI32, kI64, kF16, kBF, kF32, kF64, kC},
    {kI16, kI16, kI32, kI64, kF32, kI16, kI16, kI32, kI64, kF16, kBF, kF32, kF64, kC},
    {kI32, kI32, kI32, kI64, kF32, kI32, kI32, kI32, kI64, kF16, kBF, kF32, kF64, kC},
    {kI64, kI64, kI64, kI64, kF32, kI64, kI64, kI64, kI64, kF16, kBF, kF32, kF64, kC},
    {kF16, kF16, kF16, kF16, kF16, kF16, kF16, kF16, kF16, kF16, kF32, kF32, kF64, kC},
    {kBF, kBF, kBF, kBF, kBF, kBF, kBF, kBF, kBF, kF32, kBF, kF32, kF64, kC},
    {kF32, kF32, kF32, kF32, kF32, kF32, kF32, kF32, kF32, kF32, kF32, kF32, kF64, kC},
    {kF64, kF64, kF64, kF64, kF64, kF64, kF64, kF64, kF64, kF64, kF64, kF64, kF64, kC},
    {kC, kC, kC, kC, kC, kC, kC, kC, kC, kC, kC, kC, kC, kC},
};

Dtype from_val(Dtype::Val v) { return all_dtypes[static_cast<int>(v)]; }

}  // namespace

Dtype promote_types(const Dtype& a, const Dtype& b) {
  return from_val(kPromotion[static_cast<int>(a.val)][static_cast<int>(b.val)]);
}

Dtype::Kind kindof(const Dtype& t) {
  switch (t.val) {
    case Dtype::Val::bool_:
      return Dtype::Kind::b;
    case Dtype::Val::uint8:
    case Dtype::Val::uint16:
    case Dtype::Val::uint32:
    case Dtype::Val::uint64:
      return Dtype::Kind::u;
    case Dtype::Val::int8:
    case Dtype::Val::int16:
    case Dtype::Val::int32:
    case Dtype::Val::int64:
      return Dtype::Kind::i;
    case Dtype::Val::float16:
    case Dtype::Val::float32:
    case Dtype::Val::float64:
      return Dtype::Kind::f;
    case Dtype::Val::bfloat16:
      return Dtype::Kind::V;
    case Dtype::Val::complex64:
      return Dtype::Kind::c;
  }
  throw std::logic_error("[kindof] unknown dtype (bug)");
}

bool issubdtype(const Dtype& a, const Dtype& b) { return a == b; }

bool issubdtype(const Category& a, const Dtype&) { return false; }

bool issubdtype(const Dtype& a, const Category& b) {
  switch (b) {
    case Category::complexfloating:
      return is_complex(a);
    case Category::floating:
      return is_floating_point(a);
    case Category::inexact:
      return is_inexact(a);
    case Category::signedinteger:
      return is_signed_integer(a);
    case Category::unsignedinteger:
      return is_unsigned(a);
    case Category::integer:
      return is_integer(a);
    case Category::number:
      return a != bool_;
    case Category::generic:
      return true;
  }
  return false;
}

bool issubdtype(const Category& a, const Category& b) {
  if (a == b || b == Category::generic) return true;
  switch (b) {
    case Category::number:
      return a != Category::generic;
    case Category::integer:
      return a == Category::signedinteger || a == Category::unsignedinteger;
    case Category::inexact:
      return a == Category::floating || a == Category::complexfloating;
    default:
      return false;
  }
}

Dtype accumulation_type(Dtype t) {
  if (t == bool_) return int32;
  if (is_signed_integer(t)) return t.size <= 4 ? int32 : int64;
  if (is_unsigned(t)) return t.size <= 4 ? uint32 : uint64;
  return t;
}

Dtype inexact_type(Dtype t) { return is_inexact(t) ? t : float32; }

const char* c_type_name(Dtype t) {
  switch (t.val) {
    case Dtype::Val::bool_: return "bool";
    case Dtype::Val::uint8: return "uint8_t";
    case Dtype::Val::uint16: return "uint16_t";
    case Dtype::Val::uint32: return "uint32_t";
    case Dtype::Val::uint64: return "uint64_t";
    case Dtype::Val::int8: return "int8_t";
    case Dtype::Val::int16: return "int16_t";
    case Dtype::Val::int32: return "int32_t";
    case Dtype::Val::int64: return "int64_t";
    case Dtype::Val::float32: return "float";
    case Dtype::Val::float64: return "double";
    case Dtype::Val::float16:
    case Dtype::Val::bfloat16:
    case Dtype::Val::complex64: break;
  }
  return nullptr;
}

std::string dtype_name(Dtype t) {
  switch (t.val) {
    case Dtype::Val::bool_: return "bool";
    case Dtype::Val::uint8: return "uint8";
    case Dtype::Val::uint16: return "uint16";
    case Dtype::Val::uint32: return "uint32";
    case Dtype::Val::uint64: return "uint64";
    case Dtype::Val::int8: return "int8";
    case Dtype::Val::int16: return "int16";
    case Dtype::Val::int32: return "int32";
    case Dtype::Val::int64: return "int64";
    case Dtype::Val::float16: return "float16";
    case Dtype::Val::bfloat16: return "bfloat16";
    case Dtype::Val::float32: return "float32";
    case Dtype::Val::float64: return "float64";
    case Dtype::Val::complex64: return "complex64";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, const Dtype& t) { return os << dtype_name(t); }

finfo::finfo(Dtype t) : dtype(t) {
  switch (t.val) {
    case Dtype::Val::float16:
      bits = 16, max = 65504.0, eps = 0.0009765625, smallest_normal = 6.103515625e-05;
      break;
    case Dtype::Val::bfloat16:
      bits = 16, max = 3.3895313892515355e+38, eps = 0.0078125,
      smallest_normal = 1.1754943508222875e-38;
      break;
    case Dtype::Val::float32:
    case Dtype::Val::complex64:
      bits = 32, max = std::numeric_limits<float>::max(),
      eps = std::numeric_limits<float>::epsilon(),
      smallest_normal = std::numeric_limits<float>::min();
      if (t == complex64) dtype = float32;
      break;
    case Dtype::Val::float64:
      bits = 64, max = std::numeric_limits<double>::max(),
      eps = std::numeric_limits<double>::epsilon(),
      smallest_normal = std::numeric_limits<double>::min();
      break;
    default:
      throw std::invalid_argument("[finfo] dtype " + dtype_name(t) +
                                  " is not inexact");
  }
  min = -max;
}

iinfo::iinfo(Dtype t) : dtype(t), bits(t.size * 8) {
  if (!is_integer(t)) {
    throw std::invalid_argument("[iinfo] dtype " + dtype_name(t) + " is not an integer type");
  }
  if (is_unsigned(t)) {
    min = 0;
    max = bits == 64 ? std::numeric_limits<uint64_t>::max() : ((uint64_t{1} << bits) - 1);
  } else {
    min = bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1));
    max = bits == 64 ? uint64_t(std::numeric_limits<int64_t>::max())
                     : ((uint64_t{1} << (bits - 1)) - 1);
  }
}

}  // namespace tessera
