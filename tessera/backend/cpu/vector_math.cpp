// Note [Vector math]
// The C library computes one float32 exp or tanh in 5 to 10 ns, which makes
// every transcendental op on the CPU compute-bound by a factor of ten over its
// memory traffic (and leaves nothing for compile's fusion to win). Highway's
// vector routines (hwy/contrib/math, 1 to 4 ulp) compute a whole vector in
// about the time of one scalar call; Highway picks the widest instruction set
// of the machine at run time.
//
// Each routine is accurate only on a range of arguments (Highway documents it:
// exp up to +104, sin and cos within ±39000, log on normal positive numbers).
// A vector with a lane outside the routine's range, NaN included, has those
// lanes computed again by the scalar functor of backend/common/elementwise.h,
// so that the special values (inf, NaN, 0, denormals, huge angles) are the C
// library's. The last partial vector of a span is padded and computed as a
// whole vector: a value does not depend on where it sits in a span, so the
// unfused kernels and compile's fused blocks, which split spans differently,
// compute the same bits.
//
// The exact operations (arithmetic, abs, floor, sqrt, reciprocal...) need no
// routine: they are plain loops over the scalar operation, compiled once per
// instruction set in the same way, so that the compiler vectorises them for
// the machine's width (the default build targets the oldest x86-64, whose
// vectors are 4 floats). A loop computes the scalar operation's bits exactly
// (-fno-math-errno lets sqrt become the vector instruction).
//
// tanh is not Highway's but a rational function, about twice as fast at the
// same accuracy (rational_tanh below).
//
// Without Highway (no libhwy-dev when CMake ran) the functions are the scalar
// functors' loops.
#include "tessera/backend/cpu/vector_math.h"

#include "tessera/core/half.h"

#include <cfloat>
#include <cstring>
#include <stdexcept>
#include <utility>

#if TESSERA_HAVE_HWY
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tessera/backend/cpu/vector_math.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>
#endif

// Included again once per instruction set by foreach_target.h: what follows
// until HWY_BEFORE_NAMESPACE is defined once.
#ifndef TESSERA_VECTOR_MATH_SHARED
#define TESSERA_VECTOR_MATH_SHARED
namespace tessera::cpu {
namespace {

// A float16 (bf16 false) or bfloat16 value's float.
inline float widen_half(bool bf16, uint16_t h) {
  return bf16 ? detail::bf16_bits_to_float(h) : detail::half_bits_to_float(h);
}

// The arguments each routine is accurate for (lanes outside: the scalar functor).
struct Range {
  float lo, hi;
};

constexpr Range range_of(VectorMath f) {
  switch (f) {
    case VectorMath::exp:
    case VectorMath::expm1:
      return {-87.0f, 88.0f};  // results neither denormal nor infinite
    case VectorMath::sigmoid:
      return {-87.0f, 87.0f};  // exp(-x) in the range of exp
    case VectorMath::log:
    case VectorMath::log2:
    case VectorMath::log10:
      return {FLT_MIN, FLT_MAX};
    case VectorMath::log1p:
      return {0.0f, FLT_MAX};
    case VectorMath::sin:
    case VectorMath::cos:
      return {-39000.0f, 39000.0f};
    case VectorMath::tanh:
      return {-FLT_MAX, FLT_MAX};
    default:
      break;
  }
  return {0.0f, -1.0f};  // empty: every lane scalar
}

template <typename Op>
void scalar_lanes(const float* x, float* y, int64_t n, Range r) {
  const Op op;
  for (int64_t i = 0; i < n; ++i) {
    if (!(x[i] >= r.lo && x[i] <= r.hi)) y[i] = op(x[i]);
  }
}

// The scalar functor of f on the lanes of x outside r (all lanes for an empty r).
void scalar_fixup(VectorMath f, const float* x, float* y, int64_t n, Range r) {
  switch (f) {
#define TESSERA_VECTOR_MATH_CASE(OP, NAME) \
  case VectorMath::NAME:                   \
    return scalar_lanes<scalar::OP>(x, y, n, r);
    TESSERA_VECTOR_MATH_OPS(TESSERA_VECTOR_MATH_CASE)
#undef TESSERA_VECTOR_MATH_CASE
    default:
      break;
  }
  throw std::logic_error("[vector_math] no function (bug)");
}

}  // namespace
}  // namespace tessera::cpu
#endif

#if TESSERA_HAVE_HWY
HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// tanh as a rational function of x (odd degree 13 over even degree 6, the
// coefficients of Eigen's float tanh), within 1 ulp of float64 tanh up to
// |x| = 9, where tanh rounds to ±1 (the rational goes past 1 after that: x
// is clamped to ±8.5, the result to ±1, and ±1 returned beyond 9), and x
// itself below 0.0004.
// About half the operations of hn::Tanh (an expm1 and a division). Measured
// against float64 tanh over the floats from 1e-9 to 12: at most 2.9e-7
// relative (hn::Tanh: 2.2e-7); 2^24 values on 2 cores 4.9 -> 2.7 ms.
template <class D, class V>
HWY_INLINE V rational_tanh(D d, V a) {
  const V c = hn::Set(d, 8.5f);
  const V x = hn::Min(hn::Max(a, hn::Neg(c)), c);
  const V x2 = hn::Mul(x, x);
  V p = hn::MulAdd(x2, hn::Set(d, -2.76076847742355e-16f), hn::Set(d, 2.00018790482477e-13f));
  p = hn::MulAdd(x2, p, hn::Set(d, -8.60467152213735e-11f));
  p = hn::MulAdd(x2, p, hn::Set(d, 5.12229709037114e-08f));
  p = hn::MulAdd(x2, p, hn::Set(d, 1.48572235717979e-05f));
  p = hn::MulAdd(x2, p, hn::Set(d, 6.37261928875436e-04f));
  p = hn::MulAdd(x2, p, hn::Set(d, 4.89352455891786e-03f));
  p = hn::Mul(x, p);
  V q = hn::MulAdd(x2, hn::Set(d, 1.19825839466702e-06f), hn::Set(d, 1.18534705686654e-04f));
  q = hn::MulAdd(x2, q, hn::Set(d, 2.26843463243900e-03f));
  q = hn::MulAdd(x2, q, hn::Set(d, 4.89352518554385e-03f));
  const V one = hn::Set(d, 1.0f);
  const V r = hn::Min(hn::Max(hn::Div(p, q), hn::Neg(one)), one);  // |tanh| <= 1, always
  const V small = hn::IfThenElse(hn::Abs(a) < hn::Set(d, 0.0004f), a, r);
  return hn::IfThenElse(hn::Abs(a) > hn::Set(d, 9.0f), hn::CopySign(one, a), small);
}

template <class D, class V>
HWY_INLINE V apply(VectorMath f, D d, V x) {
  switch (f) {
    case VectorMath::exp: return hn::Exp(d, x);
    case VectorMath::expm1: return hn::Expm1(d, x);
    case VectorMath::log: return hn::Log(d, x);
    case VectorMath::log1p: return hn::Log1p(d, x);
    case VectorMath::log2: return hn::Log2(d, x);
    case VectorMath::log10: return hn::Log10(d, x);
    case VectorMath::sin: return hn::Sin(d, x);
    case VectorMath::cos: return hn::Cos(d, x);
    case VectorMath::tanh: return rational_tanh(d, x);
    case VectorMath::sigmoid: {
      const V one = hn::Set(d, 1.0f);
      return one / (one + hn::Exp(d, hn::Neg(x)));
    }
    default: break;
  }
  return x;
}

// apply, with f(±0) = ±0 for the routines that Highway gives +0 at -0.
template <class D, class V>
HWY_INLINE V apply_signed(VectorMath f, D d, V x) {
  const V r = apply(f, d, x);
  if (f == VectorMath::expm1 || f == VectorMath::sin || f == VectorMath::tanh ||
      f == VectorMath::log1p) {
    return hn::IfThenElse(x == hn::Zero(d), x, r);
  }
  return r;
}

// One function per routine, so that the switch is outside the loop.
template <VectorMath F>
HWY_NOINLINE void span(const float* x, float* y, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  constexpr Range r = range_of(F);
  const auto lo = hn::Set(d, r.lo);
  const auto hi = hn::Set(d, r.hi);
  // m lanes from src to dst, which may be the same place.
  auto one = [&](const float* src, float* dst, int64_t m) {
    const auto v = hn::LoadU(d, src);
    const auto y = apply_signed(F, d, v);
    if (hn::AllTrue(d, hn::And(v >= lo, v <= hi))) {
      hn::StoreU(y, d, dst);
      return;
    }
    HWY_ALIGN float xs[HWY_MAX_BYTES / sizeof(float)];
    HWY_ALIGN float ys[HWY_MAX_BYTES / sizeof(float)];
    hn::Store(v, d, xs);
    hn::Store(y, d, ys);
    scalar_fixup(F, xs, ys, m, r);
    std::memcpy(dst, ys, m * sizeof(float));
  };
  int64_t i = 0;
  // Two vectors a pass: a routine is a chain of dependent fused multiply-adds,
  // and two independent chains keep the multiply-add units busy.
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    const auto v0 = hn::LoadU(d, x + i);
    const auto v1 = hn::LoadU(d, x + i + lanes);
    const auto y0 = apply_signed(F, d, v0);
    const auto y1 = apply_signed(F, d, v1);
    if (hn::AllTrue(d, hn::And(hn::And(v0 >= lo, v0 <= hi), hn::And(v1 >= lo, v1 <= hi)))) {
      hn::StoreU(y0, d, y + i);
      hn::StoreU(y1, d, y + i + lanes);
    } else {
      one(x + i, y + i, lanes);
      one(x + i + lanes, y + i + lanes, lanes);
    }
  }
  for (; i + lanes <= n; i += lanes) one(x + i, y + i, lanes);
  if (i < n) {
    HWY_ALIGN float in[HWY_MAX_BYTES / sizeof(float)] = {};
    HWY_ALIGN float out[HWY_MAX_BYTES / sizeof(float)];
    std::memcpy(in, x + i, (n - i) * sizeof(float));
    one(in, out, n - i);
    std::memcpy(y + i, out, (n - i) * sizeof(float));
  }
}

void VectorMathSpan(VectorMath f, const float* x, float* y, int64_t n) {
  switch (f) {
#define TESSERA_VECTOR_MATH_CASE(OP, NAME) \
  case VectorMath::NAME:                   \
    return span<VectorMath::NAME>(x, y, n);
    TESSERA_VECTOR_MATH_OPS(TESSERA_VECTOR_MATH_CASE)
#undef TESSERA_VECTOR_MATH_CASE
    default:
      break;
  }
}

}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif

// Plain loops over the binary functors, compiled once per instruction set
// (without Highway, once): the compiler vectorises them at its full width.
#if TESSERA_HAVE_HWY
HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
#else
namespace tessera::cpu::generic {
#endif

template <typename Op>
void binary_loops(Operands form, const float* a, const float* b, float* y, int64_t n) {
  const Op op;
  switch (form) {
    case Operands::vectors:
      for (int64_t i = 0; i < n; ++i) y[i] = op(a[i], b[i]);
      return;
    case Operands::scalar_vector: {
      const float x = a[0];
      for (int64_t i = 0; i < n; ++i) y[i] = op(x, b[i]);
      return;
    }
    case Operands::vector_scalar: {
      const float z = b[0];
      for (int64_t i = 0; i < n; ++i) y[i] = op(a[i], z);
      return;
    }
  }
}

template <typename Op>
void unary_loop(const float* x, float* y, int64_t n) {
  const Op op;
  for (int64_t i = 0; i < n; ++i) y[i] = op(x[i]);
}

void VectorLoopSpan(VectorMath f, const float* x, float* y, int64_t n) {
  switch (f) {
#define TESSERA_VECTOR_LOOP_CASE(OP, NAME) \
  case VectorMath::NAME:                   \
    return unary_loop<scalar::OP>(x, y, n);
    TESSERA_VECTOR_LOOP_OPS(TESSERA_VECTOR_LOOP_CASE)
#undef TESSERA_VECTOR_LOOP_CASE
    default:
      break;
  }
}

void VectorBinarySpan(VectorBinary f, Operands form, const float* a, const float* b, float* y,
                      int64_t n) {
  switch (f) {
#define TESSERA_VECTOR_BINARY_CASE(OP, NAME) \
  case VectorBinary::NAME:                   \
    return binary_loops<scalar::OP>(form, a, b, y, n);
    TESSERA_VECTOR_BINARY_OPS(TESSERA_VECTOR_BINARY_CASE)
#undef TESSERA_VECTOR_BINARY_CASE
    case VectorBinary::none:
      break;
  }
}

// dots[g] = sum of q * x over group g of a row of B-bit values (B = 2, 4 or
// 8: value i of the row at bits B * i of the words, none straddling two;
// groups of a multiple of 16 values): eight lanes, two sets of them (which
// halves the chain of additions), that the compiler vectorises with a
// per-lane shift where the instruction set has one.
template <int B>
void q_group_dots(const uint32_t* w, const float* x, int64_t K, int group_size, float* dots) {
  constexpr uint32_t kMask = (1u << B) - 1u;
  for (int64_t g = 0; g < K / group_size; ++g) {
    float lanes[2][8] = {};
    for (int64_t k = g * group_size; k < (g + 1) * group_size; k += 16) {
      const uint32_t* wk = w + k * B / 32;
      for (int h = 0; h < 2; ++h) {
        for (int i = 0; i < 8; ++i) {
          const int v = 8 * h + i;  // the value's place in these 16
          const uint32_t word = wk[v * B / 32];
          const uint32_t q = (word >> ((v * B) % 32)) & kMask;
          lanes[h][i] += static_cast<float>(static_cast<int32_t>(q)) * x[k + v];
        }
      }
    }
    float sum[8];
    for (int i = 0; i < 8; ++i) sum[i] = lanes[0][i] + lanes[1][i];
    dots[g] = ((sum[0] + sum[4]) + (sum[1] + sum[5])) + ((sum[2] + sum[6]) + (sum[3] + sum[7]));
  }
}

// Note [4-bit dots]
// dots[g] for 4-bit values with x permuted per block of 64 (permute_q4_x):
// word j of a block holds values 8j..8j+7, and xt[8n + j] = x[8j + n], so a
// vector of words shifted right by 4n holds, in lane j, the value whose x is
// xt[8n + j]: per eight values a shift, an and, a conversion and a fused
// multiply-add, with no shuffle. (gcc left the loop above scalar: a scalar
// conversion and FMA per value.) Groups of 64 values or more sum whole
// vectors; groups of 32 take the lanes of a block apart.
void Q4GroupDots(const uint32_t* w, const float* xt, int64_t K, int group_size, float* dots) {
  const int64_t groups = K / group_size, blocks = K / 64;
  for (int64_t g = 0; g < groups; ++g) dots[g] = 0.f;
#if TESSERA_HAVE_HWY
  const hn::CappedTag<float, 8> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::RebindToUnsigned<decltype(df)> du;
  const size_t N = hn::Lanes(df);
  const auto mask = hn::Set(du, 15u);
  auto value = [&](auto v) { return hn::ConvertTo(df, hn::BitCast(di, hn::And(v, mask))); };
  auto block_half = [&](const uint32_t* wb, const float* xb, auto acc0, auto acc1) {
    const auto v = hn::LoadU(du, wb);
    acc0 = hn::MulAdd(value(v), hn::LoadU(df, xb), acc0);
    acc1 = hn::MulAdd(value(hn::ShiftRight<4>(v)), hn::LoadU(df, xb + 8), acc1);
    acc0 = hn::MulAdd(value(hn::ShiftRight<8>(v)), hn::LoadU(df, xb + 16), acc0);
    acc1 = hn::MulAdd(value(hn::ShiftRight<12>(v)), hn::LoadU(df, xb + 24), acc1);
    acc0 = hn::MulAdd(value(hn::ShiftRight<16>(v)), hn::LoadU(df, xb + 32), acc0);
    acc1 = hn::MulAdd(value(hn::ShiftRight<20>(v)), hn::LoadU(df, xb + 40), acc1);
    acc0 = hn::MulAdd(value(hn::ShiftRight<24>(v)), hn::LoadU(df, xb + 48), acc0);
    acc1 = hn::MulAdd(hn::ConvertTo(df, hn::BitCast(di, hn::ShiftRight<28>(v))),
                      hn::LoadU(df, xb + 56), acc1);
    return std::make_pair(acc0, acc1);
  };
  if (group_size % 64 == 0) {
    const int64_t per_group = group_size / 64;
    for (int64_t g = 0; g < groups; ++g) {
      auto acc0 = hn::Zero(df), acc1 = hn::Zero(df);
      for (int64_t b = g * per_group; b < (g + 1) * per_group; ++b) {
        for (size_t h = 0; h < 8; h += N) {
          auto [a0, a1] = block_half(w + b * 8 + h, xt + b * 64 + h, acc0, acc1);
          acc0 = a0, acc1 = a1;
        }
      }
      dots[g] = hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0, acc1)));
    }
    return;
  }
  HWY_ALIGN float lanes[8];
  for (int64_t b = 0; b < blocks; ++b) {
    for (size_t h = 0; h < 8; h += N) {
      auto [a0, a1] = block_half(w + b * 8 + h, xt + b * 64 + h, hn::Zero(df), hn::Zero(df));
      hn::Store(hn::Add(a0, a1), df, lanes);
      for (size_t j = 0; j < N; ++j) dots[(b * 64 + (h + j) * 8) / group_size] += lanes[j];
    }
  }
#else
  for (int64_t b = 0; b < blocks; ++b) {
    for (int j = 0; j < 8; ++j) {
      const uint32_t word = w[b * 8 + j];
      float acc = 0.f;
      for (int n = 0; n < 8; ++n) {
        acc += static_cast<float>((word >> (4 * n)) & 15u) * xt[b * 64 + 8 * n + j];
      }
      dots[(b * 64 + j * 8) / group_size] += acc;
    }
  }
#endif
}

// Note [Half-precision GEMV] (vector_math.h): for each weight row, the rows
// of x one after another (the weight row stays in the first-level cache), two
// accumulators each.
void HalfRowDots(bool bf16, const uint16_t* w, int64_t ldw, const float* x, int64_t M, int64_t K,
                 int64_t n0, int64_t n1, float* y, int64_t ldy) {
  int64_t vector_end = 0;
#if TESSERA_HAVE_HWY
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  vector_end = K / (2 * N) * (2 * N);
  auto rows = [&](auto dh) {
    using H = hn::TFromD<decltype(dh)>;
    for (int64_t n = n0; n < n1; ++n) {
      const H* wn = reinterpret_cast<const H*>(w + n * ldw);
      for (int64_t m = 0; m < M; ++m) {
        const float* xm = x + m * K;
        auto a0 = hn::Zero(df), a1 = hn::Zero(df);
        for (int64_t k = 0; k < vector_end; k += 2 * N) {
          a0 = hn::MulAdd(hn::PromoteTo(df, hn::LoadU(dh, wn + k)), hn::LoadU(df, xm + k), a0);
          a1 = hn::MulAdd(hn::PromoteTo(df, hn::LoadU(dh, wn + k + N)), hn::LoadU(df, xm + k + N),
                          a1);
        }
        y[m * ldy + n] = hn::GetLane(hn::SumOfLanes(df, hn::Add(a0, a1)));
      }
    }
  };
  if (bf16) {
    rows(hn::Rebind<hwy::bfloat16_t, decltype(df)>());
  } else {
    rows(hn::Rebind<hwy::float16_t, decltype(df)>());
  }
#endif
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t m = 0; m < M; ++m) {
      float s = vector_end > 0 ? y[m * ldy + n] : 0.f;
      for (int64_t k = vector_end; k < K; ++k) s += widen_half(bf16, w[n * ldw + k]) * x[m * K + k];
      y[m * ldy + n] = s;
    }
  }
}

void QGroupDots(int bits, const uint32_t* w, const float* x, int64_t K, int group_size,
                float* dots) {
  switch (bits) {
    case 2:
      return q_group_dots<2>(w, x, K, group_size, dots);
    case 4:
      return q_group_dots<4>(w, x, K, group_size, dots);
    default:
      return q_group_dots<8>(w, x, K, group_size, dots);
  }
}

#if TESSERA_HAVE_HWY
}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#else
}  // namespace tessera::cpu::generic
#endif

#if !TESSERA_HAVE_HWY || HWY_ONCE
namespace tessera::cpu {

#if TESSERA_HAVE_HWY
HWY_EXPORT(VectorMathSpan);
HWY_EXPORT(VectorLoopSpan);
HWY_EXPORT(VectorBinarySpan);
HWY_EXPORT(QGroupDots);
HWY_EXPORT(Q4GroupDots);
HWY_EXPORT(HalfRowDots);
#endif

void half_row_dots(bool bf16, const uint16_t* w, int64_t ldw, const float* x, int64_t M,
                   int64_t K, int64_t n0, int64_t n1, float* y, int64_t ldy) {
#if TESSERA_HAVE_HWY
  HWY_DYNAMIC_DISPATCH(HalfRowDots)(bf16, w, ldw, x, M, K, n0, n1, y, ldy);
#else
  generic::HalfRowDots(bf16, w, ldw, x, M, K, n0, n1, y, ldy);
#endif
}

void vector_math(VectorMath f, const float* x, float* y, int64_t n) {
  if (n <= 0) return;
#if TESSERA_HAVE_HWY
  if (f > VectorMath::first_loop) return HWY_DYNAMIC_DISPATCH(VectorLoopSpan)(f, x, y, n);
  HWY_DYNAMIC_DISPATCH(VectorMathSpan)(f, x, y, n);
#else
  if (f > VectorMath::first_loop) return generic::VectorLoopSpan(f, x, y, n);
  scalar_fixup(f, x, y, n, Range{0.0f, -1.0f});
#endif
}

void vector_binary(VectorBinary f, Operands form, const float* a, const float* b, float* y,
                   int64_t n) {
  if (n <= 0) return;
#if TESSERA_HAVE_HWY
  HWY_DYNAMIC_DISPATCH(VectorBinarySpan)(f, form, a, b, y, n);
#else
  generic::VectorBinarySpan(f, form, a, b, y, n);
#endif
}

void q_group_dots(int bits, const uint32_t* w, const float* x, int64_t K, int group_size,
                  float* dots) {
#if TESSERA_HAVE_HWY
  HWY_DYNAMIC_DISPATCH(QGroupDots)(bits, w, x, K, group_size, dots);
#else
  generic::QGroupDots(bits, w, x, K, group_size, dots);
#endif
}

void permute_q4_x(const float* x, int64_t K, float* xt) {
  for (int64_t b = 0; b < K / 64; ++b) {
    for (int n = 0; n < 8; ++n) {
      for (int j = 0; j < 8; ++j) xt[b * 64 + 8 * n + j] = x[b * 64 + 8 * j + n];
    }
  }
}

void q4_group_dots(const uint32_t* w, const float* xt, int64_t K, int group_size, float* dots) {
#if TESSERA_HAVE_HWY
  HWY_DYNAMIC_DISPATCH(Q4GroupDots)(w, xt, K, group_size, dots);
#else
  generic::Q4GroupDots(w, xt, K, group_size, dots);
#endif
}

}  // namespace tessera::cpu
#endif
