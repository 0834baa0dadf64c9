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
//   - The rows of x fill one m16 fragment of mma.sync m16n8k16 (rows from M on
//     are zero registers); each warp owns kTiles n8 tiles of output columns,
//     i.e. 8 kTiles weight rows. Lane 4g + t reads weight row g of each tile.
//   - A lane chunk is 32 sub values of one weight row (sub sub-chunks of 32
//     values, chosen per bits so that it is a whole number of 16-byte loads,
//     48 to 80 bytes); the 4 lanes t of a row read 4 consecutive lane chunks,
//     a step of span = 4 * 32 sub values. Within one m16n8k16 product each lane
//     contributes 4 values of K, so the product's k order is a permutation of
//     the step's K: the dequantizer emits pairs of values in the order that
//     costs least to unpack (pair_k), and x is staged in shared memory in that
//     same order, so that a lane's A fragment is one 8-byte load per 8 rows.
//   - Dequantization is scale * q + bias per group of 32 or more values. For 2,
//     4 and 8 bits (8 bits only in float16) the q pairs are masked into the
//     mantissas of 16-bit floats of a fixed exponent (a "magic number": 128 + q
//     in bfloat16, 1024 + q in float16), so that two values cost a mask, a
//     subtraction and a fused multiply-add; 8 bits in bfloat16 go through
//     float32 (a byte permute into 2^23 + q). The rounding is the reference's
//     (dequantize, then the product in T with float32 accumulation): the
//     dequantized value is rounded to T once.
//   - Split-K: x's rows for the block's K range sit in shared memory (at most
//     kSmemBytes), and a grid of ceil(N / kCols) blocks alone can leave most of
//     the 132 multiprocessors of an H200 idle. So K is cut into main_splits
//     ranges of whole steps, enough that the grid has about kBlocksPerSm
//     blocks per multiprocessor and each range fits the shared memory, plus
//     one range for the tail (K modulo span, in steps of 128 values, lanes past
//     K reading nothing). With one range the block writes y; with more, each
//     writes float32 partial sums and a second kernel adds them and rounds.
//   - Used (backend/cuda/quantized.cu) for bfloat16 and float16 x on sm_80 and
//     later when every row of packed words is a multiple of 16 bytes; float32
//     and float64 x keep the scalar kernel (their tests expect float32
//     products, which a 16-bit tensor-core operand would not give), and other
//     shapes dequantize and use the matrix product.
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
constexpr int kSmemBytes = 48 * 1024;
constexpr int kBlocksPerSm = 4;
constexpr int kTailStep = 128;

// Sub-chunks of 32 values in a lane chunk.
TESSERA_QUANT_HD constexpr int sub_chunks(int bits) { return bits == 2 ? 8 : (bits == 6 || bits == 8) ? 2 : 4; }
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

struct SmallM {
  int main_splits;  // ranges of whole steps
  int steps;        // K / span
  int tail;         // K % span
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

inline SmallM small_m_plan(int bits, int M, int64_t N, int64_t K, int64_t batches, int sms) {
  const int span = span_of(bits);
  SmallM p;
  p.steps = static_cast<int>(K / span);
  p.tail = static_cast<int>(K % span);
  if (p.steps == 0) {
    p.main_splits = 0;
    return p;
  }
  // Steps that fit the shared memory (rows of range + 16 values).
  const int fit = std::max(1, (kSmemBytes / 2 / M - 16) / span);
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

// out[32 c ..] for every 32-value chunk c: values of all rows are contiguous,
// and groups never straddle rows, so chunk c's group is 32 c / group_size.
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
    const int64_t g = c * 32 / group_size;
    const C s = widen_q(scales[g]), z = widen_q(biases[g]);
    alignas(16) T v[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) v[i] = static_cast<T>(s * static_cast<C>(q[i]) + z);
    uint4* dst = reinterpret_cast<uint4*>(out + c * 32);
#pragma unroll
    for (int i = 0; i < 32 * int(sizeof(T)) / 16; ++i) dst[i] = reinterpret_cast<const uint4*>(v)[i];
  }
}

// ---- small M: dequantize into mma B fragments -------------------------------

template <typename T>
struct Magic;
template <>
struct Magic<__nv_bfloat16> {
  static constexpr uint32_t bits = 0x43004300u;  // 128, 128
};
template <>
struct Magic<__half> {
  static constexpr uint32_t bits = 0x64006400u;  // 1024, 1024
};

template <typename T>
using Vec2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;

template <typename T>
__device__ __forceinline__ Vec2<T> as_vec2(uint32_t u) {
  return *reinterpret_cast<Vec2<T>*>(&u);
}
template <typename T>
__device__ __forceinline__ uint32_t as_u32(Vec2<T> v) {
  return *reinterpret_cast<uint32_t*>(&v);
}

// The 16 pairs (pair_k order) of T values scale * q + bias of a sub-chunk's
// B words.
template <typename T, int B>
__device__ __forceinline__ void dequant32(const uint32_t* w, Vec2<T> s2, Vec2<T> b2,
                                          uint32_t (&p)[16]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr bool f32_path = B == 8 && mma::Kind<T>::bf16;
  if constexpr (f32_path) {
    const float s = __low2float(s2), b = __low2float(b2);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const uint32_t word = w[i / 2], r = i % 2;
      // 2^23 + byte r (low) and 2^23 + byte r + 2 (high).
      const float lo = __uint_as_float(__byte_perm(word, 0x4B000000u, 0x7650u + r)) - 8388608.f;
      const float hi = __uint_as_float(__byte_perm(word, 0x4B000000u, 0x7652u + r)) - 8388608.f;
      p[i] = mma::pack2<T>(fmaf(s, lo, b), fmaf(s, hi, b));
    }
  } else {
    const Vec2<T> magic = as_vec2<T>(Magic<T>::bits);
    const Vec2<T> one = as_vec2<T>(mma::pack2<T>(1.f, 1.f));
    const Vec2<T> neg_magic = __hneg2(magic);
    uint32_t raw[16];
    if constexpr (B == 2 || B == 4 || B == 8) {
      constexpr int per_word = 16 / B;
      constexpr uint32_t mask = ((1u << B) - 1u) * 0x00010001u;
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        raw[i] = ((w[i / per_word] >> (B * (i % per_word))) & mask) | Magic<T>::bits;
      }
    } else {
      uint32_t q[32];
      quant::unpack32<B>(w, q);
#pragma unroll
      for (int i = 0; i < 16; ++i) raw[i] = q[2 * i] | (q[2 * i + 1] << 16) | Magic<T>::bits;
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const Vec2<T> q = __hfma2(as_vec2<T>(raw[i]), one, neg_magic);  // exact
      p[i] = as_u32<T>(__hfma2(q, s2, b2));
    }
  }
#endif
}

// Stages rows [0, M) of x for K range [k0, k1) in shared memory in the
// fragment order: the block's main steps (whole spans) first, then the tail in
// steps of 128; positions past k1 hold zero. Each thread moves 32 values.
template <typename T, int B>
__device__ __forceinline__ void stage_x(T* xs, int rs, const T* x, int64_t K, int M, int64_t k0,
                                        int main_len, int range) {
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
    if (inside) {
      const uint4* src = reinterpret_cast<const uint4*>(x + m * K + k0 + rel);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        uint4 u = src[j];
        v[4 * j] = u.x, v[4 * j + 1] = u.y, v[4 * j + 2] = u.z, v[4 * j + 3] = u.w;
      }
    }
    auto half = [&](int k) -> uint32_t { return (v[k / 2] >> (16 * (k % 2))) & 0xffffu; };
    T* row = xs + m * rs + base;
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      uint2 o = make_uint2(0, 0);
      if (inside) {
        o.x = half(pair_k<B>(2 * s, 0)) | (half(pair_k<B>(2 * s, 1)) << 16);
        o.y = half(pair_k<B>(2 * s + 1, 0)) | (half(pair_k<B>(2 * s + 1, 1)) << 16);
      }
      *reinterpret_cast<uint2*>(row + s * 16) = o;
    }
  }
}

// Per lane: the A fragment (rows g and g + 8) of the 16-value step at `pos`.
template <bool kHigh>
__device__ __forceinline__ void a_frag(const uint32_t* xs_w, int rs_w, int M, int g, int pos,
                                       uint32_t (&a)[4]) {
  a[0] = a[1] = a[2] = a[3] = 0;
  if (g < M) {
    const uint2 u = *reinterpret_cast<const uint2*>(xs_w + g * rs_w + pos / 2);
    a[0] = u.x, a[2] = u.y;
  }
  if constexpr (kHigh) {
    if (g + 8 < M) {
      const uint2 u = *reinterpret_cast<const uint2*>(xs_w + (g + 8) * rs_w + pos / 2);
      a[1] = u.x, a[3] = u.y;
    }
  }
}

// Grid (ceil(N / kCols), splits, batches), kWarps warps; Note [Small-M
// quantized product].
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
  T* xs = reinterpret_cast<T*>(smem);

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
  const int rs = range + 16;  // row stride (elements): 8-byte loads of 8 rows hit 16 banks pairs
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t words_per_row = K * B / 32, groups = K / group_size;
  const int64_t n_base = int64_t(blockIdx.x) * kCols + warp * kTiles * 8;

  const uint32_t* wrow[kTiles];
  const T* srow[kTiles];
  const T* brow[kTiles];
  bool valid[kTiles];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    const int64_t n = n_base + j * 8 + g;
    valid[j] = n < N;
    const int64_t r = int64_t(batch) * N + (valid[j] ? n : 0);
    wrow[j] = w + r * words_per_row;
    srow[j] = scales + r * groups;
    brow[j] = biases + r * groups;
  }

  const T* xb = x + int64_t(batch) * M * K;
  stage_x<T, B>(xs, rs, xb, K, M, k0, main_len, range);
  __syncthreads();

  float c[kTiles][4];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.f;
  const uint32_t* xs_w = reinterpret_cast<const uint32_t*>(xs);
  const int rs_w = rs / 2;

  for (int a = 0; a < main_len / span; ++a) {
    const int64_t k = k0 + int64_t(a) * span + t * lane_len;
    uint4 wv[kTiles][V];
    T sv[kTiles][SUB], bv[kTiles][SUB];
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      const uint4* src = reinterpret_cast<const uint4*>(wrow[j] + k * B / 32);
#pragma unroll
      for (int v = 0; v < V; ++v) wv[j][v] = valid[j] ? __ldg(src + v) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int sb = 0; sb < SUB; ++sb) {
        const int64_t gi = (k + sb * 32) / group_size;
        sv[j][sb] = srow[j][gi];
        bv[j][sb] = brow[j][gi];
      }
    }
#pragma unroll
    for (int sb = 0; sb < SUB; ++sb) {
      uint32_t p[kTiles][16];
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
        const uint32_t* words = reinterpret_cast<const uint32_t*>(wv[j]) + sb * B;
        dequant32<T, B>(words, Vec2<T>{sv[j][sb], sv[j][sb]}, Vec2<T>{bv[j][sb], bv[j][sb]},
                        p[j]);
      }
#pragma unroll
      for (int s = 0; s < 8; ++s) {
        uint32_t af[4];
        a_frag<kHigh>(xs_w, rs_w, M, g, a * span + (sb * 8 + s) * 16 + t * 4, af);
#pragma unroll
        for (int j = 0; j < kTiles; ++j) mma::mma16816<T>(c[j], af, p[j][2 * s], p[j][2 * s + 1]);
      }
    }
  }

  if (tail_split) {
    for (int a = 0; a < range / kTailStep; ++a) {
      const int64_t k = k0 + int64_t(a) * kTailStep + t * 32;
      const bool in_k = k < K;
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
        uint32_t words[B];
        uint32_t p[16];
        if (valid[j] && in_k) {
#pragma unroll
          for (int i = 0; i < B; ++i) words[i] = __ldg(wrow[j] + k * B / 32 + i);
          const T s = srow[j][k / group_size], b = brow[j][k / group_size];
          dequant32<T, B>(words, Vec2<T>{s, s}, Vec2<T>{b, b}, p);
        } else {
#pragma unroll
          for (int i = 0; i < 16; ++i) p[i] = 0;
        }
#pragma unroll
        for (int s = 0; s < 8; ++s) {
          uint32_t af[4];
          a_frag<kHigh>(xs_w, rs_w, M, g, a * kTailStep + s * 16 + t * 4, af);
          mma::mma16816<T>(c[j], af, p[2 * s], p[2 * s + 1]);
        }
      }
    }
  }

  const bool direct = plan.splits() == 1;
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    const int64_t n = n_base + j * 8 + 2 * t;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = g + 8 * h;
      if (m >= M) continue;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (n + e >= N) continue;
        const float v = c[j][2 * h + e];
        if (direct) {
          y[(int64_t(batch) * M + m) * N + n + e] = mma::from_f<T>(v);
        } else {
          partials[((int64_t(batch) * plan.splits() + split) * M + m) * N + n + e] = v;
        }
      }
    }
  }
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
  const size_t smem = size_t(M) * (range + 16) * sizeof(T);
  dim3 grid(static_cast<unsigned>((N + kCols - 1) / kCols), static_cast<unsigned>(plan.splits()),
            static_cast<unsigned>(batches));
  quant::dispatch_bits(bits, [&](auto b) {
    constexpr int B = decltype(b)::value;
    auto kernel = M > 8 ? small_m_kernel<T, B, true> : small_m_kernel<T, B, false>;
    kernel<<<grid, kWarps * 32, smem, st>>>(x, w, scales, biases, y, partials, M, N, K,
                                            group_size, plan);
  });
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess || plan.splits() == 1) return err;
  const int64_t total = batches * M * N;
  sum_partials_kernel<T><<<blocks_for(total, 256), 256, 0, st>>>(partials, y, plan.splits(),
                                                                 int64_t(M) * N, total);
  return cudaGetLastError();
}

#endif  // __CUDACC__

}  // namespace tessera::gpu::qmm
