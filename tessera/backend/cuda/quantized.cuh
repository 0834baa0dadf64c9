// Quantized-product kernels on plain pointers (Note [Affine quantization] in
// backend/common/quantize.h gives the packing), so that a standalone harness
// can include them:
//
//   qmm::dequantize<T>(w, scales, biases, out, values, group_size, bits, stream);
//   qmm::SmallM plan = qmm::small_m_plan(bits, M, N, K, batches, sms);
//   qmm::small_m<T>(x, w, scales, biases, y, partials, M, N, K, group_size, bits,
//                   batches, plan, stream);  // y (M, N) = x (M, K) @ W^T
//
// Note [Small-M quantized product]
// y = x W^T with W (N, K) packed along K (nn.QuantizedLinear's layout) and at
// most 16 rows of x per weight matrix (decoding, small batches): a pass over
// the packed weights must run at memory bandwidth, so it reads them once, with
// 16-byte loads, and never writes a dequantized copy.
//   - Each warp owns 16 weight rows, the A operand of mma.sync (m16n8k16 in
//     float16, m16n8k8 in tf32), and x's rows 0..7 (and 8..15 when M > 8, a
//     second product) are the n8 B operand, rows from M on zero registers.
//     Lane 4g + t reads weight rows g and g + 8 of the warp's 16, so that its
//     dequantized values are its A registers as they come.
//   - A lane chunk is 32 sub values of one weight row (sub sub-chunks of 32
//     values, chosen per bits so that it is a whole number of 16-byte loads,
//     48 to 80 bytes); the 4 lanes t of a row read 4 consecutive lane chunks,
//     a step of span = 4 * 32 sub values. Within one product each lane
//     contributes 4 values of K (2 in tf32), so the product's k order is a
//     permutation of the step's K: the dequantizer emits pairs of values in
//     the order that costs least to unpack (pair_k), and x is staged in shared
//     memory in that same order, so that a lane's B fragment is one 8-byte
//     (16-byte in float32) load per 8 rows.
//   - Dequantization is scale * q + bias per group of 32 or more values,
//     exact or within the precision of the tensor-core operand, never rounded
//     to bfloat16: the products keep the precision of the float32 reference
//     (the dequantized matrix times x) that the tests hold them to.
//     float16 x: m16n8k16 in float16. The q pairs are masked into the
//     mantissas of float16 values of a fixed exponent (a "magic number",
//     1024 + q, exact for q < 1024), so that two values cost a mask, a
//     subtraction and a fused multiply-add (one rounding to float16, whose
//     11 bits are the operand's precision).
//     bfloat16 x: a bfloat16 operand would round every weight to 8 bits, so
//     the values are computed in float32 (q as 2^23 + q, minus 2^23) and
//     enter m16n8k8 in tf32 (11 significant bits, truncated), x staged as
//     float32 (exact). This costs about twice the instructions per value.
//   - Split-K: x's rows for the block's K range sit in shared memory (at most
//     kSmemBytes), and a grid of ceil(N / kCols) blocks alone can leave most of
//     the 132 multiprocessors of an H200 idle. So K is cut into main_splits
//     ranges of whole steps, enough that the grid has about kBlocksPerSm
//     blocks per multiprocessor and each range fits the shared memory, plus
//     one range for the tail (K modulo span, in steps of 128 values, lanes past
//     K reading nothing). With one range the block writes y; with more, each
//     writes float32 partial sums, and the last block of a column block to
//     finish (a per-column-block counter, zeroed once per stream and reset by
//     that block) adds them in split order and rounds; without counters a
//     second kernel does.
//   - Used (backend/cuda/quantized.cu) for bfloat16 and float16 x on sm_80 and
//     later with at most kMaxRows = 16 rows of x per weight matrix, when every
//     row of packed words is a multiple of 16 bytes, but for one row of x
//     (Note [Quantized GEMV]); float32 x takes that kernel up to four rows,
//     float64 x the scalar one (their tests expect float32 products). More rows
//     (prefill) and the other layout dequantize w into a temporary, 16 bytes
//     a store, and multiply with cuBLASLt: past a few dozen rows the product
//     is bound by the GEMM, and the temporary costs one write and one read of
//     the 16-bit matrix.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "tessera/backend/common/quantize.h"
#include "tessera/backend/cuda/mma.cuh"

namespace tessera::gpu::qmm {

constexpr int kMaxRows = 16;
constexpr int kWarps = 8;
constexpr int kTiles = 2;
constexpr int kCols = kWarps * kTiles * 8;  // output columns of a block
constexpr int kSmemBytes = 96 * 1024;  // of staged x per block
constexpr int kBlocksPerSm = 4;
constexpr int kTailStep = 128;

// Sub-chunks of 32 values in a lane chunk.
TESSERA_QUANT_HD constexpr int sub_chunks(int bits) {
  return bits == 2 ? 8 : (bits == 6 || bits == 8) ? 2 : 4;
}
TESSERA_QUANT_HD constexpr int span_of(int bits) { return 128 * sub_chunks(bits); }

// Offset in its 32-value sub-chunk of the low (hi = 0) or high value of pair
// i (Note [Small-M quantized product]): for 2, 4 and 8 bits word j's pair r
// holds values r and r + 16 / B of the word; otherwise pairs are consecutive.
template <int B>
__host__ __device__ constexpr int pair_k(int i, int hi) {
  if constexpr (B == 2 || B == 4 || B == 8) {
    constexpr int per_word = 16 / B;
    return (i / per_word) * (32 / B) + i % per_word + hi * per_word;
  } else {
    return 2 * i + hi;
  }
}

// What x is staged as: float32 for bfloat16 (the tf32 product), else T.
template <typename T>
using Staged = std::conditional_t<std::is_same_v<T, __nv_bfloat16>, float, T>;

struct SmallM {
  int main_splits;  // ranges of whole steps
  int steps;        // K / span
  int tail;         // K % span
  // With several splits: one zeroed counter per column block (and batch).
  // The last block of a column block to finish sums the partials and resets
  // its counter; without counters a second kernel sums them.
  unsigned* counters = nullptr;
  TESSERA_QUANT_HD int splits() const { return main_splits + (tail > 0 ? 1 : 0); }
};

// Few rows of x, rows of packed words a multiple of 16 bytes and x and w
// aligned to 16 bytes: the kernel applies.
inline bool small_m_applies(int bits, int64_t M, int64_t N, int64_t K, int64_t batches,
                            const void* x, const void* w) {
  return M >= 1 && M <= kMaxRows && (K * bits / 8) % 16 == 0 && batches <= 65535 &&
         N <= (int64_t(1) << 30) && K <= (int64_t(1) << 30) &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
}

template <typename T>
SmallM small_m_plan(int bits, int M, int64_t N, int64_t K, int64_t batches, int sms) {
  const int span = span_of(bits);
  SmallM p;
  p.steps = static_cast<int>(K / span);
  p.tail = static_cast<int>(K % span);
  if (p.steps == 0) {
    p.main_splits = 0;
    return p;
  }
  // Steps that fit the shared memory (rows of range + 16 values).
  const int fit = std::max(1, (kSmemBytes / int(sizeof(Staged<T>)) / M - 16) / span);
  const int64_t col_blocks = (N + kCols - 1) / kCols * batches;
  const int64_t want = (int64_t(kBlocksPerSm) * sms + col_blocks - 1) / col_blocks;
  int64_t s = std::max<int64_t>((p.steps + fit - 1) / fit, want);
  p.main_splits = static_cast<int>(std::min<int64_t>(s, p.steps));
  return p;
}

// Float32 scratch the plan needs for partial sums (0 for one range).
inline int64_t small_m_partials(const SmallM& p, int M, int64_t N, int64_t batches) {
  return p.splits() > 1 ? int64_t(p.splits()) * M * N * batches : 0;
}

#ifdef __CUDACC__

template <typename T>
struct Compute {
  using type = std::conditional_t<std::is_same_v<T, double>, double, float>;
};

template <typename T>
__device__ __forceinline__ typename Compute<T>::type widen_q(T v) {
  return static_cast<typename Compute<T>::type>(v);
}

// ---- dequantize: one thread per 32 values, 16-byte stores -------------------

// B words from p, in 16- or 8-byte loads where kVec (p aligned to them).
template <int B, bool kVec>
__device__ __forceinline__ void load_words(const uint32_t* p, uint32_t (&w)[B]) {
  if constexpr (kVec && B % 4 == 0) {
#pragma unroll
    for (int i = 0; i < B / 4; ++i) {
      uint4 v = __ldg(reinterpret_cast<const uint4*>(p) + i);
      w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z, w[4 * i + 3] = v.w;
    }
  } else if constexpr (kVec && B % 2 == 0) {
#pragma unroll
    for (int i = 0; i < B / 2; ++i) {
      uint2 v = __ldg(reinterpret_cast<const uint2*>(p) + i);
      w[2 * i] = v.x, w[2 * i + 1] = v.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < B; ++i) w[i] = __ldg(p + i);
  }
}

// The group of value k. Group sizes are powers of two (32, 64 or 128, checked
// by the ops), so this is a shift. A 64-bit division is a called routine (84
// instructions on sm_90): the GEMV's loop called it 8 times for about 1300
// instructions of products, and an H100 profile of that kernel showed it
// bound by latency (issue slots 45% busy, DRAM 34%).
__device__ __forceinline__ int64_t group_of(int64_t k, int group_size) {
  return k >> (__ffs(group_size) - 1);
}

// out[32 c ..] for every 32-value chunk c: values of all rows are contiguous,
// and groups never straddle rows, so chunk c's group is that of value 32 c.
template <typename T, int B, bool kVec>
__global__ void dequantize_kernel(const uint32_t* __restrict__ w, const T* __restrict__ scales,
                                  const T* __restrict__ biases, T* __restrict__ out,
                                  int64_t chunks, int group_size) {
  using C = typename Compute<T>::type;
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < chunks;
       c += int64_t(gridDim.x) * blockDim.x) {
    uint32_t words[B];
    load_words<B, kVec>(w + c * B, words);
    uint32_t q[32];
    quant::unpack32<B>(words, q);
    const int64_t g = group_of(c * 32, group_size);
    const C s = widen_q(scales[g]), z = widen_q(biases[g]);
    alignas(16) T v[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) v[i] = static_cast<T>(s * static_cast<C>(q[i]) + z);
    uint4* dst = reinterpret_cast<uint4*>(out + c * 32);
#pragma unroll
    for (int i = 0; i < 32 * int(sizeof(T)) / 16; ++i) {
      dst[i] = reinterpret_cast<const uint4*>(v)[i];
    }
  }
}

// ---- small M: dequantize into mma B fragments -------------------------------

// (v & mask) | bits in one instruction.
__device__ __forceinline__ uint32_t and_or(uint32_t v, uint32_t mask, uint32_t bits) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(v), "r"(mask), "r"(bits));
  return d;
}

// The B bits of value k of a sub-chunk's words, shifted down (k a compile-time
// position once unrolled), with `bits` or-ed in.
template <int B>
__device__ __forceinline__ uint32_t value_bits(const uint32_t* w, int k, uint32_t bits) {
  const int p = k * B, word = p >> 5, sh = p & 31;
  const uint32_t v = sh + B > 32 ? __funnelshift_r(w[word], w[word + 1], sh) : w[word] >> sh;
  return and_or(v, (1u << B) - 1u, bits);
}

// q of value k of a sub-chunk's words as a float: the float 2^23 + q (its
// bits 0x4B000000 | q), minus 2^23, exactly.
template <int B>
__device__ __forceinline__ float q_f32(const uint32_t* w, int k) {
  uint32_t bits;
  if constexpr (B == 8) {
    bits = __byte_perm(w[k / 4], 0x4B000000u, 0x7650u + k % 4);
  } else {
    bits = value_bits<B>(w, k, 0x4B000000u);
  }
  return __uint_as_float(bits) - 8388608.f;
}

// Folded 4-bit values (Note [Quantized GEMV]): the rotation of word w by 16
// and its shifts by 8 bring nibble j to bit 12 (odd j) or 16 (even j), where
// exponent 11 or 7 makes the float 2048 + q or 128 + q, one and-or a value.
__device__ __forceinline__ void folded_views(uint32_t w, uint32_t (&v)[4]) {
  v[0] = __byte_perm(w, w, 0x1032), v[1] = w << 8, v[2] = w, v[3] = w >> 8;
}
template <int j>
__device__ __forceinline__ float folded_q4(const uint32_t (&v)[4]) {
  constexpr int view = j == 0 || j == 7 ? 0 : (j + 1) / 2, p = j % 2 ? 12 : 16;
  return __uint_as_float((v[view] & (0xFu << p)) | (uint32_t(127 + 23 - p) << 23));
}

// The float32 scale * q + bias of value k of a sub-chunk's words.
template <int B>
__device__ __forceinline__ float value_f32(const uint32_t* w, int k, float s, float b) {
  return fmaf(s, q_f32<B>(w, k), b);
}

// Pair i (pair_k order) of float16 values scale * q + bias of a sub-chunk's
// words: q masked into the mantissa of 1024 + q (exact for q < 1024), minus
// 1024, times the scale plus the bias, two values an instruction.
template <int B>
__device__ __forceinline__ uint32_t value_pair_f16(const uint32_t* w, int i, __half2 s2,
                                                   __half2 b2) {
  constexpr uint32_t kMagic = 0x64006400u;  // 1024, 1024
  uint32_t raw;
  if constexpr (B == 2 || B == 4 || B == 8) {
    constexpr int per_word = 16 / B;
    raw = and_or(w[i / per_word] >> (B * (i % per_word)), ((1u << B) - 1u) * 0x00010001u, kMagic);
  } else {
    raw = value_bits<B>(w, 2 * i, kMagic) | (value_bits<B>(w, 2 * i + 1, 0u) << 16);
  }
  const __half2 one = __floats2half2_rn(1.f, 1.f), neg_magic = __floats2half2_rn(-1024.f, -1024.f);
  const __half2 q = __hfma2(*reinterpret_cast<const __half2*>(&raw), one, neg_magic);
  const __half2 v = __hfma2(q, s2, b2);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Stages rows [0, M) of x for the block's K range in shared memory in the
// fragment order: the block's main steps (whole spans) first, then the tail
// in steps of 128; positions past K hold zero. Each thread moves 32 values.
template <typename T, int B>
__device__ __forceinline__ void stage_x(Staged<T>* xs, int rs, const T* x, int64_t K, int M,
                                        int64_t k0, int main_len, int range) {
  constexpr int span = span_of(B), lane_len = span / 4;
  const int chunks = range / 32;
  for (int i = threadIdx.x; i < M * chunks; i += blockDim.x) {
    const int m = i / chunks, c = i % chunks, rel = c * 32;
    int base;
    if (rel < main_len) {
      const int a = rel / span, in = rel % span, t = in / lane_len, sub = (in % lane_len) / 32;
      base = a * span + sub * 8 * 16 + t * 4;
    } else {
      const int r = rel - main_len, a = r / kTailStep, t = (r % kTailStep) / 32;
      base = main_len + a * kTailStep + t * 4;
    }
    uint32_t v[16];
    const bool inside = k0 + rel < K;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint4 u = make_uint4(0, 0, 0, 0);
      if (inside) u = reinterpret_cast<const uint4*>(x + m * K + k0 + rel)[j];
      v[4 * j] = u.x, v[4 * j + 1] = u.y, v[4 * j + 2] = u.z, v[4 * j + 3] = u.w;
    }
    auto half = [&](int k) -> uint32_t { return (v[k / 2] >> (16 * (k % 2))) & 0xffffu; };
    Staged<T>* row = xs + m * rs + base;
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      const int k0_ = pair_k<B>(2 * s, 0), k1_ = pair_k<B>(2 * s, 1);
      const int k2_ = pair_k<B>(2 * s + 1, 0), k3_ = pair_k<B>(2 * s + 1, 1);
      if constexpr (std::is_same_v<Staged<T>, float>) {
        // bfloat16 to float32: the bits in the high half.
        *reinterpret_cast<float4*>(row + s * 16) =
            make_float4(__uint_as_float(half(k0_) << 16), __uint_as_float(half(k1_) << 16),
                        __uint_as_float(half(k2_) << 16), __uint_as_float(half(k3_) << 16));
      } else {
        *reinterpret_cast<uint2*>(row + s * 16) =
            make_uint2(half(k0_) | (half(k1_) << 16), half(k2_) | (half(k3_) << 16));
      }
    }
  }
}

// c[h] += the 16 weight rows (tile 0: rows g, tile 1: rows g + 8 of lane
// 4g + t) of the sub-chunk (words wd, scale and bias) times x's rows 8h + 0..7
// (the 32 staged values at pos, pos + 16, ..., pos + 112): the weights are the
// A operand and x the B operand, so that a lane's dequantized values are its
// A registers and its x row's values one shared-memory load.
template <typename T, int B, bool kHigh>
__device__ __forceinline__ void mma_sub(float (&c)[2][4], const uint32_t (&wd)[kTiles][B],
                                        const T (&sv)[kTiles], const T (&bv)[kTiles],
                                        const Staged<T>* xs, int rs, int M, int g, int pos) {
  static_assert(kTiles == 2, "a warp's two n8 tiles are the A operand's 16 rows");
  const bool lo_row = g < M, hi_row = kHigh && g + 8 < M;
  if constexpr (std::is_same_v<Staged<T>, float>) {
    // bfloat16 x: dequantized values stay float32 and enter the tf32 product.
    float s[kTiles], b[kTiles];
#pragma unroll
    for (int j = 0; j < kTiles; ++j) s[j] = mma::to_f(sv[j]), b[j] = mma::to_f(bv[j]);
    auto value = [&](int j, int k) { return __float_as_uint(value_f32<B>(wd[j], k, s[j], b[j])); };
#pragma unroll
    for (int st = 0; st < 8; ++st) {
      float4 xa = make_float4(0.f, 0.f, 0.f, 0.f), xb = xa;
      if (lo_row) xa = *reinterpret_cast<const float4*>(xs + g * rs + pos + st * 16);
      if (hi_row) xb = *reinterpret_cast<const float4*>(xs + (g + 8) * rs + pos + st * 16);
#pragma unroll
      for (int pr = 0; pr < 2; ++pr) {
        const int klo = pair_k<B>(2 * st + pr, 0), khi = pair_k<B>(2 * st + pr, 1);
        const uint32_t a[4] = {value(0, klo), value(1, klo), value(0, khi), value(1, khi)};
        mma::mma1688_tf32(c[0], a, __float_as_uint(pr ? xa.z : xa.x),
                          __float_as_uint(pr ? xa.w : xa.y));
        if constexpr (kHigh) {
          mma::mma1688_tf32(c[1], a, __float_as_uint(pr ? xb.z : xb.x),
                            __float_as_uint(pr ? xb.w : xb.y));
        }
      }
    }
  } else {
    const __half2 s0(sv[0], sv[0]), s1(sv[1], sv[1]), b0(bv[0], bv[0]), b1(bv[1], bv[1]);
    const uint32_t* xw = reinterpret_cast<const uint32_t*>(xs);
#pragma unroll
    for (int st = 0; st < 8; ++st) {
      const uint32_t a[4] = {value_pair_f16<B>(wd[0], 2 * st, s0, b0),
                             value_pair_f16<B>(wd[1], 2 * st, s1, b1),
                             value_pair_f16<B>(wd[0], 2 * st + 1, s0, b0),
                             value_pair_f16<B>(wd[1], 2 * st + 1, s1, b1)};
      uint2 u = make_uint2(0, 0);
      if (lo_row) u = *reinterpret_cast<const uint2*>(xw + (g * rs + pos + st * 16) / 2);
      mma::mma16816<T>(c[0], a, u.x, u.y);
      if constexpr (kHigh) {
        uint2 v = make_uint2(0, 0);
        if (hi_row) v = *reinterpret_cast<const uint2*>(xw + ((g + 8) * rs + pos + st * 16) / 2);
        mma::mma16816<T>(c[1], a, v.x, v.y);
      }
    }
  }
}

// Grid (ceil(N / kCols), splits, batches), kWarps warps; Note [Small-M
// quantized product].
// The words, scales and biases of weight rows first + step j (j < R) of
// matrix `batch`; rows at or past N are marked invalid and read row 0's.
template <typename T, int R>
struct WeightRows {
  const uint32_t* w[R];
  const T* s[R];
  const T* b[R];
  bool valid[R];

  __device__ __forceinline__ WeightRows(const uint32_t* words, const T* scales, const T* biases,
                                        int64_t batch, int64_t first, int step, int64_t N,
                                        int64_t words_per_row, int64_t groups) {
#pragma unroll
    for (int j = 0; j < R; ++j) {
      const int64_t n = first + int64_t(j) * step;
      valid[j] = n < N;
      const int64_t row = batch * N + (valid[j] ? n : 0);
      w[j] = words + row * words_per_row;
      s[j] = scales + row * groups;
      b[j] = biases + row * groups;
    }
  }
};

template <typename T, int B, bool kHigh>
__global__ void __launch_bounds__(kWarps * 32, 2)
    small_m_kernel(const T* __restrict__ x, const uint32_t* __restrict__ w,
                   const T* __restrict__ scales, const T* __restrict__ biases, T* __restrict__ y,
                   float* __restrict__ partials, int M, int64_t N, int64_t K, int group_size,
                   SmallM plan) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int SUB = sub_chunks(B), span = span_of(B), lane_len = span / 4;
  constexpr int V = B * SUB / 4;  // 16-byte loads of a lane chunk
  extern __shared__ uint4 smem[];
  Staged<T>* xs = reinterpret_cast<Staged<T>*>(smem);

  const int split = blockIdx.y, batch = blockIdx.z;
  const bool tail_split = split >= plan.main_splits;
  int64_t k0;
  int main_len, range;
  if (!tail_split) {
    const int a0 = int(int64_t(split) * plan.steps / plan.main_splits);
    const int a1 = int(int64_t(split + 1) * plan.steps / plan.main_splits);
    k0 = int64_t(a0) * span;
    main_len = (a1 - a0) * span;
    range = main_len;
  } else {
    k0 = int64_t(plan.steps) * span;
    main_len = 0;
    range = (plan.tail + kTailStep - 1) / kTailStep * kTailStep;
  }
  const int rs = range + 16;  // row stride: the fragment loads of 8 rows avoid bank conflicts
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t words_per_row = K * B / 32, groups = K / group_size;
  const int64_t n_base = int64_t(blockIdx.x) * kCols + warp * kTiles * 8;

  const WeightRows<T, kTiles> rows(w, scales, biases, batch, n_base + g, 8, N, words_per_row,
                                   groups);

  stage_x<T, B>(xs, rs, x + int64_t(batch) * M * K, K, M, k0, main_len, range);
  __syncthreads();

  float c[2][4];  // x rows 0..7 and 8..15
#pragma unroll
  for (int h = 0; h < 2; ++h) c[h][0] = c[h][1] = c[h][2] = c[h][3] = 0.f;
  const T zero = mma::from_f<T>(0.f);

  for (int a = 0; a < main_len / span; ++a) {
    const int64_t k = k0 + int64_t(a) * span + t * lane_len;
    uint4 wv[kTiles][V];
    T sv[kTiles][SUB], bv[kTiles][SUB];
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      const uint4* src = reinterpret_cast<const uint4*>(rows.w[j] + k * B / 32);
#pragma unroll
      for (int v = 0; v < V; ++v) wv[j][v] = rows.valid[j] ? __ldg(src + v) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int sb = 0; sb < SUB; ++sb) {
        const int64_t gi = group_of(k + sb * 32, group_size);
        sv[j][sb] = rows.valid[j] ? rows.s[j][gi] : zero;
        bv[j][sb] = rows.valid[j] ? rows.b[j][gi] : zero;
      }
    }
#pragma unroll
    for (int sb = 0; sb < SUB; ++sb) {
      uint32_t wd[kTiles][B];
      T s1[kTiles], b1[kTiles];
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
#pragma unroll
        for (int i = 0; i < B; ++i) wd[j][i] = reinterpret_cast<const uint32_t*>(wv[j])[sb * B + i];
        s1[j] = sv[j][sb], b1[j] = bv[j][sb];
      }
      mma_sub<T, B, kHigh>(c, wd, s1, b1, xs, rs, M, g, a * span + sb * 128 + t * 4);
    }
  }

  if (tail_split) {
    for (int a = 0; a < range / kTailStep; ++a) {
      const int64_t k = k0 + int64_t(a) * kTailStep + t * 32;
      uint32_t wd[kTiles][B];
      T s1[kTiles], b1[kTiles];
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
        const bool on = rows.valid[j] && k < K;
#pragma unroll
        for (int i = 0; i < B; ++i) wd[j][i] = on ? __ldg(rows.w[j] + k * B / 32 + i) : 0u;
        s1[j] = on ? rows.s[j][group_of(k, group_size)] : zero;
        b1[j] = on ? rows.b[j][group_of(k, group_size)] : zero;
      }
      mma_sub<T, B, kHigh>(c, wd, s1, b1, xs, rs, M, g, a * kTailStep + t * 4);
    }
  }

  // c[h][2 r + e] is y's row 8 h + 2 t + e, column n_base + 8 r + g.
  const bool direct = plan.splits() == 1;
#pragma unroll
  for (int h = 0; h < (kHigh ? 2 : 1); ++h) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int m = 8 * h + 2 * t + e;
      if (m >= M) continue;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int64_t n = n_base + 8 * r + g;
        if (n >= N) continue;
        const float v = c[h][2 * r + e];
        if (direct) {
          y[(int64_t(batch) * M + m) * N + n] = mma::from_f<T>(v);
        } else {
          partials[((int64_t(batch) * plan.splits() + split) * M + m) * N + n] = v;
        }
      }
    }
  }
  if (direct || !plan.counters) return;
  // The last block of this column block to finish adds the splits' partials
  // in split order (the same sums as sum_partials_kernel).
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  unsigned* counter = plan.counters + int64_t(batch) * gridDim.x + blockIdx.x;
  if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == unsigned(plan.splits() - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  const int64_t MN = int64_t(M) * N;
  const float* p = partials + int64_t(batch) * plan.splits() * MN;
  for (int i = threadIdx.x; i < M * kCols; i += blockDim.x) {
    const int m = i / kCols;
    const int64_t n = int64_t(blockIdx.x) * kCols + i % kCols;
    if (n >= N) continue;
    float acc = 0.f;
    for (int sp = 0; sp < plan.splits(); ++sp) acc += __ldcg(p + sp * MN + int64_t(m) * N + n);
    y[(int64_t(batch) * M + m) * N + n] = mma::from_f<T>(acc);
  }
  if (threadIdx.x == 0) *counter = 0u;
#endif
}

// y[b, m, n] = sum over splits of partials[b, split, m, n].
template <typename T>
__global__ void sum_partials_kernel(const float* __restrict__ partials, T* __restrict__ y,
                                    int splits, int64_t MN, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = i / MN, r = i % MN;
    const float* p = partials + b * splits * MN + r;
    float acc = 0.f;
    for (int s = 0; s < splits; ++s) acc += p[s * MN];
    y[i] = mma::from_f<T>(acc);
  }
}

inline unsigned blocks_for(int64_t n, int threads) {
  return static_cast<unsigned>(std::min<int64_t>((n + threads - 1) / threads, 1 << 20));
}

// out (rows, values) = dequantize(w, scales, biases), values a multiple of 32.
template <typename T>
cudaError_t dequantize(const uint32_t* w, const T* scales, const T* biases, T* out, int64_t n,
                       int group_size, int bits, cudaStream_t st) {
  const int64_t chunks = n / 32;
  if (chunks == 0) return cudaSuccess;
  // w may be a view at any word; out is a fresh allocation.
  const bool vec = reinterpret_cast<uintptr_t>(w) % 16 == 0;
  quant::dispatch_bits(bits, [&](auto b) {
    constexpr int B = decltype(b)::value;
    auto kernel = vec ? dequantize_kernel<T, B, true> : dequantize_kernel<T, B, false>;
    kernel<<<blocks_for(chunks, 256), 256, 0, st>>>(w, scales, biases, out, chunks, group_size);
  });
  return cudaGetLastError();
}

// y (batches, M, N) = x (batches, M, K) @ W^T, W (batches, N, K) packed; T is
// __nv_bfloat16 or __half. partials: small_m_partials(plan, ...) floats.
template <typename T>
cudaError_t small_m(const T* x, const uint32_t* w, const T* scales, const T* biases, T* y,
                    float* partials, int M, int64_t N, int64_t K, int group_size, int bits,
                    int64_t batches, const SmallM& plan, cudaStream_t st) {
  const int span = span_of(bits);
  int range = plan.main_splits > 0 ? (plan.steps + plan.main_splits - 1) / plan.main_splits * span
                                   : 0;
  range = std::max(range, (plan.tail + kTailStep - 1) / kTailStep * kTailStep);
  const size_t smem = size_t(M) * (range + 16) * sizeof(Staged<T>);
  dim3 grid(static_cast<unsigned>((N + kCols - 1) / kCols), static_cast<unsigned>(plan.splits()),
            static_cast<unsigned>(batches));
  cudaError_t err = cudaSuccess;
  quant::dispatch_bits(bits, [&](auto b) {
    constexpr int B = decltype(b)::value;
    auto kernel = M > 8 ? small_m_kernel<T, B, true> : small_m_kernel<T, B, false>;
    // Above 48 KB a kernel's dynamic shared memory needs the opt-in, once.
    static const cudaError_t opt_in[2] = {
        cudaFuncSetAttribute(small_m_kernel<T, B, false>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes),
        cudaFuncSetAttribute(small_m_kernel<T, B, true>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes)};
    if (opt_in[M > 8] != cudaSuccess) {
      err = opt_in[M > 8];
      return;
    }
    kernel<<<grid, kWarps * 32, smem, st>>>(x, w, scales, biases, y, partials, M, N, K,
                                            group_size, plan);
  });
  if (err == cudaSuccess) err = cudaGetLastError();
  if (err != cudaSuccess || plan.splits() == 1 || plan.counters) return err;
  const int64_t total = batches * M * N;
  sum_partials_kernel<T><<<blocks_for(total, 256), 256, 0, st>>>(partials, y, plan.splits(),
                                                                 int64_t(M) * N, total);
  return cudaGetLastError();
}

#endif  // __CUDACC__

// ---- M <= 4: one pass on the CUDA cores --------------------------------------

// Note [Quantized GEMV]
// With one to four rows of x (decoding) the tensor-core kernel above spends
// most of each mma on zero rows. Here each warp owns kGemvRowsPerWarp weight
// rows whole (no split-K, no shared memory, no second pass): lane l takes the
// 32-value chunks l, l + 32, ... of its rows, loads gemv_unroll(B) of them (B
// words each, 16-byte loads where B allows) before it uses any, so that
// enough bytes are in flight to run at memory bandwidth, and adds
// scale * (q . x) + bias * sum(x) per chunk for every row of x, in float32
// (q enters as the float 2^23 + q minus 2^23, exact). x is read as it is,
// from L1 (every warp of a block reads the same values). A shuffle tree sums
// the lanes. Exact to the float32 reference within float32 summation.
//   With 4-bit weights and half x, q is not shifted out of its word: each
// value is one and-or to the float 2048 + q or 128 + q (folded_q4) and one
// fma, and 2048 times the chunk's sum of x at odd positions and 128 times
// that at even ones come off the chunk's dot product. The float32 sums carry
// 2048 + q for 16 values, so a chunk loses about 2^-13 relative, far below the
// 2^-9 of the half result. On an H100 (14336 x 4096, group 64, bfloat16, one
// row) this and two chunks a pass (not four) took 30.9 us to 24.2 us; the
// profile before (issue slots 45% busy, DRAM 34%) was bound by instructions
// and latency both, and 8-bit weights (twice the bytes, one byte_perm a value)
// ran as fast as 4-bit ones.
//   QuantizedMatmul uses it for one row of bfloat16 or float16 x and for up to
// four rows of float32 x. Measured on an H100 (bench/quantized_kernels_gpu.cu,
// 14336 x 4096, 4 bits, group 64, bfloat16): one row 31.8 us against 37.2 us
// for the tensor-core kernel, but two rows 46.2 against 37.1 and four 62.6
// against 38.0, so from two rows of half x the tensor cores stay. For float32
// x it replaces a warp-per-column kernel (127 us for one row).
constexpr int kGemvMaxRows = 4;
constexpr int kGemvWarps = 4;
constexpr int kGemvRowsPerWarp = 2;

// Chunks a lane loads before it uses them: about 64 bytes a weight row.
TESSERA_QUANT_HD constexpr int gemv_unroll(int bits) {
  return bits == 2 ? 8 : bits == 3 ? 5 : bits == 4 ? 4 : bits == 5 ? 3 : 2;
}


#ifdef __CUDACC__

// Eight values of x from 16-byte aligned p, as float32.
template <typename T>
__device__ __forceinline__ void load_x8(const T* p, float (&v)[8]) {
  const uint4* q = reinterpret_cast<const uint4*>(p);
  if constexpr (std::is_same_v<T, float>) {
    float a[4], b[4];
    mma::unpack16<T>(__ldg(q), a);
    mma::unpack16<T>(__ldg(q + 1), b);
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = a[i], v[4 + i] = b[i];
  } else {
    mma::unpack16<T>(__ldg(q), v);
  }
}

// The packed matrices of one launch (Note [Grouped products] in
// core/grouped.h): W_i (n_i rows, batches of them when count is 1)
// with its scales and biases, into y_i; blocks [first_i, first_i+1) along x
// of the grid are W_i's.
template <typename T>
struct GemvWeights {
  static constexpr int kMax = 4;
  const uint32_t* w[kMax];
  const T* s[kMax];
  const T* b[kMax];
  T* y[kMax];
  int64_t n[kMax];
  unsigned first[kMax + 1];
  int count;
};

// Grid (GemvWeights::first[count], batches), kGemvWarps warps, R rows a warp;
// MM bounds M.
template <typename T, int B, int MM, int R>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemv_kernel(const T* __restrict__ x, const GemvWeights<T> ws, int M, int64_t K,
                int group_size) {
  constexpr bool kFolded = B == 4 && !std::is_same_v<T, float>;
  constexpr int U = kFolded ? 2 : gemv_unroll(B);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t batch = blockIdx.y;
  // This block's matrix (selects, not an indexed load from the parameters).
  const uint32_t* w = ws.w[0];
  const T* scales = ws.s[0];
  const T* biases = ws.b[0];
  T* y = ws.y[0];
  int64_t N = ws.n[0];
  unsigned first = 0;
#pragma unroll
  for (int i = 1; i < GemvWeights<T>::kMax; ++i) {
    if (i < ws.count && blockIdx.x >= ws.first[i]) {
      w = ws.w[i], scales = ws.s[i], biases = ws.b[i], y = ws.y[i], N = ws.n[i];
      first = ws.first[i];
    }
  }
  const int64_t n0 = (int64_t(blockIdx.x - first) * kGemvWarps + warp) * R;
  if (n0 >= N) return;
  const int64_t chunks = K / 32, words_per_row = K * B / 32, groups = K / group_size;
  const T* xb = x + batch * M * K;
  const WeightRows<T, R> rows(w, scales, biases, batch, n0, 1, N, words_per_row, groups);
  float acc[MM][R];
#pragma unroll
  for (int m = 0; m < MM; ++m) {
#pragma unroll
    for (int r = 0; r < R; ++r) acc[m][r] = 0.f;
  }
  for (int64_t c0 = lane; c0 < chunks; c0 += 32 * U) {
    uint32_t wd[U][R][B];
    float sv[U][R], bv[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + 32 * u;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (c < chunks && rows.valid[r]) {
          load_words<B, true>(rows.w[r] + c * B, wd[u][r]);
          const int64_t gi = group_of(c * 32, group_size);
          sv[u][r] = mma::to_f(rows.s[r][gi]);
          bv[u][r] = mma::to_f(rows.b[r][gi]);
        } else {
#pragma unroll
          for (int i = 0; i < B; ++i) wd[u][r][i] = 0u;
          sv[u][r] = bv[u][r] = 0.f;
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + 32 * u;
      if (c >= chunks) break;
#pragma unroll
      for (int m = 0; m < MM; ++m) {
        if (m >= M) break;
        const T* xc = xb + m * K + c * 32;
        float dot[R], sum = 0.f, odd = 0.f;
#pragma unroll
        for (int r = 0; r < R; ++r) dot[r] = 0.f;
#pragma unroll
        for (int p = 0; p < 4; ++p) {
          float xv[8];
          load_x8(xc + 8 * p, xv);
          if constexpr (kFolded) {
            sum += xv[0] + xv[2] + xv[4] + xv[6];  // the even values' sum, for now
            odd += xv[1] + xv[3] + xv[5] + xv[7];
#pragma unroll
            for (int r = 0; r < R; ++r) {
              uint32_t v[4];
              folded_views(wd[u][r][p], v);
              dot[r] = fmaf(folded_q4<0>(v), xv[0], dot[r]);
              dot[r] = fmaf(folded_q4<1>(v), xv[1], dot[r]);
              dot[r] = fmaf(folded_q4<2>(v), xv[2], dot[r]);
              dot[r] = fmaf(folded_q4<3>(v), xv[3], dot[r]);
              dot[r] = fmaf(folded_q4<4>(v), xv[4], dot[r]);
              dot[r] = fmaf(folded_q4<5>(v), xv[5], dot[r]);
              dot[r] = fmaf(folded_q4<6>(v), xv[6], dot[r]);
              dot[r] = fmaf(folded_q4<7>(v), xv[7], dot[r]);
            }
          } else {
#pragma unroll
            for (int i = 0; i < 8; ++i) {
              sum += xv[i];
#pragma unroll
              for (int r = 0; r < R; ++r) dot[r] = fmaf(q_f32<B>(wd[u][r], 8 * p + i), xv[i], dot[r]);
            }
          }
        }
        float fold = 0.f;
        if constexpr (kFolded) fold = fmaf(2048.f, odd, 128.f * sum), sum += odd;
#pragma unroll
        for (int r = 0; r < R; ++r) acc[m][r] += sv[u][r] * (dot[r] - fold) + bv[u][r] * sum;
      }
    }
  }
#pragma unroll
  for (int m = 0; m < MM; ++m) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float v = mma::warp_sum(acc[m][r]);
      if (lane == r && m < M && rows.valid[r]) y[(batch * M + m) * N + n0 + r] = mma::from_f<T>(v);
    }
  }
}

// y_i (M, n_i) = x (M, K) @ W_i^T for each matrix of ws (first[] filled in
// here), one launch; M <= kGemvMaxRows, batches 1 when ws has several.
template <typename T, int R = kGemvRowsPerWarp>
cudaError_t gemv(const T* x, GemvWeights<T> ws, int M, int64_t K, int group_size, int bits,
                 int64_t batches, cudaStream_t st) {
  const int64_t rows_per_block = int64_t(kGemvWarps) * R;
  ws.first[0] = 0;
  for (int i = 0; i < ws.count; ++i) {
    ws.first[i + 1] = ws.first[i] + static_cast<unsigned>((ws.n[i] + rows_per_block - 1) /
                                                          rows_per_block);
  }
  dim3 grid(ws.first[ws.count], static_cast<unsigned>(batches));
  quant::dispatch_bits(bits, [&](auto b) {
    constexpr int B = decltype(b)::value;
    auto kernel = M <= 1 ? gemv_kernel<T, B, 1, R>
                : M <= 2 ? gemv_kernel<T, B, 2, R>
                         : gemv_kernel<T, B, 4, R>;
    kernel<<<grid, kGemvWarps * 32, 0, st>>>(x, ws, M, K, group_size);
  });
  return cudaGetLastError();
}

// y (batches, M, N) = x (batches, M, K) @ W^T for M <= kGemvMaxRows, W
// (batches, N, K) packed; T is float, __nv_bfloat16 or __half.
template <typename T, int R = kGemvRowsPerWarp>
cudaError_t gemv(const T* x, const uint32_t* w, const T* scales, const T* biases, T* y, int M,
                 int64_t N, int64_t K, int group_size, int bits, int64_t batches,
                 cudaStream_t st) {
  GemvWeights<T> ws{};
  ws.w[0] = w, ws.s[0] = scales, ws.b[0] = biases, ws.y[0] = y, ws.n[0] = N, ws.count = 1;
  return gemv<T, R>(x, ws, M, K, group_size, bits, batches, st);
}

#endif  // __CUDACC__

}  // namespace tessera::gpu::qmm
