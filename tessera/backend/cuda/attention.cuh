// Flash attention kernels (forward, backward, split-key decoding) on plain
// pointers and strides, so that a standalone harness can include them.
//
// Note [Flash attention kernels]
// q (B, Hq, Tq, D), k and v (B, Hkv, Tkv, D), each with its last axis
// contiguous and strides (in elements) of the other three; query head h reads
// k/v head h / (Hq / Hkv). The scores s = scale q.k (+ an additive mask) live
// in the log2 domain (times log2(e)) so that exp2 gives the softmax. A key that
// the causal mask or a boolean mask hides gets the lowest float32 (as the
// fallback's where(mask, s, lowest)), a key past Tkv gets -inf: a row that
// hides every key thus averages v uniformly, like the fallback. Causal is
// aligned to the end: query i sees key j iff j <= i + Tkv - Tq.
//   - Forward (FA2): one block of 16 * W query rows per (row block, head,
//     batch); each warp owns 16 rows and runs the online softmax over key
//     tiles of BN (mma.sync m16n8k16, ldmatrix, cp.async double buffering,
//     16-byte chunks swizzled by row within shared memory). It writes o and the
//     natural log-sum-exp of each row (sinks included; the lowest float32 for a
//     row whose keys are all hidden) for the backward pass.
//   - Backward (FA2): delta = rowsum(dO o) - dlse first; then one block per
//     (key tile, k/v head, batch) holds dK and dV of its 16 * W keys in
//     registers over every query head of its group and every query tile, and
//     adds dQ (float32) with atomics; a last pass casts dQ.
//   - Decode: each block takes a chunk of keys for one (batch, k/v head) and
//     every query row of its group (Tq * Hq / Hkv <= 16, one m16 tile), and
//     writes partial (o, max, sum); a combine kernel merges the chunks.
// Head dims are padded to the kernel's D (64, 128 or 256) by zero-filled loads.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "tessera/backend/cuda/mma.cuh"

namespace tessera::gpu::attention {

enum MaskKind : int { kNone = 0, kCausal = 1, kBool = 2, kAdditive = 3 };

struct FwdParams {
  const void* q;
  const void* k;
  const void* v;
  const void* mask;    // uint8 (bool) or T (additive), or null
  const float* sinks;  // (Hq,) or null
  void* o;             // (B, Hq, Tq, d) contiguous
  float* lse;          // (B, Hq, Tq)
  int64_t qs[3], ks[3], vs[3];  // strides of axes 0..2
  int64_t ms[4];                // mask strides over (B, Hq, Tq, Tkv), 0 where broadcast
  int b, hq, hkv, tq, tkv, d;
  float scale;       // of the scores
  float scale_log2;  // scale * log2(e)
  int mask_kind;
};

struct BwdParams {
  FwdParams f;          // o is read here (contiguous), lse read
  const void* dout;     // strides dos
  int64_t dos[3];
  const float* dlse;    // (B, Hq, Tq) or null
  float* delta;         // (B, Hq, Tq) scratch
  float* dq_acc;        // (B, Hq, Tq, d) float32, zeroed
  void* dq;             // (B, Hq, Tq, d) contiguous
  void* dk;             // (B, Hkv, Tkv, d) contiguous
  void* dv;             // (B, Hkv, Tkv, d) contiguous
};

#ifdef __CUDACC__

constexpr float kLowest = -3.402823466e38f;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

using mma::cp_async16;
using mma::cp_async_commit;
using mma::cp_async_wait;
using mma::from_f;
using mma::Kind;
using mma::ldsm_x4;
using mma::ldsm_x4_t;
using mma::mma16816;
using mma::pack2;
using mma::smem_u32;
using mma::to_f;

// Element offset of (row r, column c) in a tile of rows of C elements whose
// 16-byte chunks are swizzled by the row (C a multiple of 64).
template <int C>
__device__ __forceinline__ int sw(int r, int c) {
  return r * C + ((((c >> 3) ^ r) & 7) | ((c >> 3) & ~7)) * 8 + (c & 7);
}

// ldmatrix addresses: lane l gives the row address of 8x8 matrix l / 8. In the
// "a" pattern matrices step down 8 rows then right 8 columns (an A operand, or
// a B operand read transposed); in the "b" pattern right then down (a B
// operand, or an A operand read transposed). With 16-byte chunks swizzled by
// the row's low bits, the address of the 16x16 block at rows r0, columns
// 16 * kk is base + r0 * row bytes + (y ^ 32 kk): one xor per load.
struct Lanes {
  uint32_t row_a, y_a, row_b, y_b;
  __device__ __forceinline__ explicit Lanes(int lane) {
    const uint32_t lr = lane % 8;
    row_a = lr + ((lane >> 3) & 1) * 8;
    y_a = ((lane >> 4) ^ lr) * 16;
    row_b = lr + (lane >> 4) * 8;
    y_b = (((lane >> 3) & 1) ^ lr) * 16;
  }
};
template <int RB>
__device__ __forceinline__ uint32_t at(uint32_t base, int r0, uint32_t y, int kk) {
  return base + r0 * RB + (y ^ (kk * 32));
}

// c (16 x 8 NB) += a (16 x 16 KS: rows r0.. of a tile, ldmatrix from base_a)
// times the transpose of rows 0.. of a tile (ldmatrix from base_b, "b"
// pattern): q k^T, k q^T, v dO^T.
template <typename T, int KS, int NB, int RB>
__device__ __forceinline__ void mma_rows_rows(float (&c)[NB][4], uint32_t base_a, int r0,
                                              const Lanes& ln, uint32_t base_b) {
#pragma unroll
  for (int kk = 0; kk < KS; ++kk) {
    uint32_t a[4];
    ldsm_x4(a, at<RB>(base_a, r0, ln.y_a, kk));
#pragma unroll
    for (int n2 = 0; n2 < NB / 2; ++n2) {
      uint32_t bb[4];
      ldsm_x4(bb, at<RB>(base_b, n2 * 16, ln.y_b, kk));
      mma16816<T>(c[2 * n2], a, bb[0], bb[1]);
      mma16816<T>(c[2 * n2 + 1], a, bb[2], bb[3]);
    }
  }
}

// c (16 x 8 NB) += f (16 x 8 KB float accumulators, rounded to T as an A
// operand) times rows r0.. of a tile read transposed (base_b, "a" pattern):
// P v, P^T dO, dS^T q.
template <typename T, int KB, int NB, int RB>
__device__ __forceinline__ void mma_frags_rows(float (&c)[NB][4], const float (&f)[KB][4],
                                               uint32_t base_b, int r0, const Lanes& ln) {
#pragma unroll
  for (int kk = 0; kk < KB / 2; ++kk) {
    uint32_t a[4] = {pack2<T>(f[2 * kk][0], f[2 * kk][1]), pack2<T>(f[2 * kk][2], f[2 * kk][3]),
                     pack2<T>(f[2 * kk + 1][0], f[2 * kk + 1][1]),
                     pack2<T>(f[2 * kk + 1][2], f[2 * kk + 1][3])};
#pragma unroll
    for (int d2 = 0; d2 < NB / 2; ++d2) {
      uint32_t bb[4];
      ldsm_x4_t(bb, at<RB>(base_b, r0 + kk * 16, ln.y_a, d2));
      mma16816<T>(c[2 * d2], a, bb[0], bb[1]);
      mma16816<T>(c[2 * d2 + 1], a, bb[2], bb[3]);
    }
  }
}

// Rows [0, R) of a tile from g (row stride rs) into shared memory; rows from
// `rows` on and columns from d on are zero-filled.
template <typename T, int R, int C, int NT>
__device__ __forceinline__ void load_tile(T* s, const T* g, int64_t rs, int rows, int d,
                                          int tid) {
  constexpr int CH = C / 8;
#pragma unroll
  for (int i = 0; i < (R * CH + NT - 1) / NT; ++i) {
    int idx = tid + i * NT;
    if (R * CH % NT == 0 || idx < R * CH) {
      int r = idx / CH, c = (idx % CH) * 8;
      bool ok = r < rows && c < d;
      cp_async16(smem_u32(s + sw<C>(r, c)), ok ? g + r * rs + c : g, ok);
    }
  }
}

// 2^x on the special function unit (-inf gives 0).
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffff, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffff, x, 1);
  return x + __shfl_xor_sync(0xffffffff, x, 2);
}

// The log2-domain score of query i, key j from the raw dot product x (both in
// range), under the mask.
template <typename T>
__device__ __forceinline__ float masked_score(const FwdParams& p, const unsigned char* mask_bh,
                                              float x, int i, int j, int off) {
  float s = x * p.scale_log2;
  if (p.mask_kind == kCausal) {
    if (j > i + off) s = kLowest;
  } else if (p.mask_kind == kBool) {
    if (!mask_bh[i * p.ms[2] + j * p.ms[3]]) s = kLowest;
  } else if (p.mask_kind == kAdditive) {
    const T* m = reinterpret_cast<const T*>(mask_bh);
    s = fmaxf(s + to_f(m[i * p.ms[2] + j * p.ms[3]]) * kLog2e, kLowest);
  }
  return s;
}

// ---- forward

template <typename T, int D, int W, int BN>
struct FwdConfig {
  static constexpr int BM = 16 * W, NT = 32 * W;
  static constexpr int smem = (BM * D + 4 * BN * D) * sizeof(T);
};

template <typename T, int D, int W, int BN>
__global__ void __launch_bounds__(32 * W) fwd_kernel(const FwdParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using Cfg = FwdConfig<T, D, W, BN>;
  constexpr int BM = Cfg::BM, NT = Cfg::NT;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);
  T* sK = sQ + BM * D;
  T* sV = sK + 2 * BN * D;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int mb = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (p.hq / p.hkv);
  const int m0 = mb * BM, off = p.tkv - p.tq;
  const T* q = static_cast<const T*>(p.q) + b * p.qs[0] + h * p.qs[1] + m0 * p.qs[2];
  const T* k = static_cast<const T*>(p.k) + b * p.ks[0] + hk * p.ks[1];
  const T* v = static_cast<const T*>(p.v) + b * p.vs[0] + hk * p.vs[1];
  const unsigned char* mask_bh = nullptr;
  if (p.mask_kind >= kBool) {
    size_t es = p.mask_kind == kBool ? 1 : sizeof(T);
    mask_bh = static_cast<const unsigned char*>(p.mask) + (b * p.ms[0] + h * p.ms[1]) * es;
  }
  int n_blocks = (p.tkv + BN - 1) / BN;
  if (p.mask_kind == kCausal && m0 + off >= 0) {
    n_blocks = min(n_blocks, (m0 + BM - 1 + off) / BN + 1);
  }
  load_tile<T, BM, D, NT>(sQ, q, p.qs[2], p.tq - m0, p.d, tid);
  load_tile<T, BN, D, NT>(sK, k, p.ks[2], p.tkv, p.d, tid);
  load_tile<T, BN, D, NT>(sV, v, p.vs[2], p.tkv, p.d, tid);
  cp_async_commit();

  float acc[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
  float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};
  const int r_base = warp * 16;
  const int i0 = m0 + r_base + g, i1 = i0 + 8;
  constexpr int RB = D * sizeof(T);
  const Lanes ln(lane);
  const uint32_t qa = smem_u32(sQ) + ln.row_a * RB;

  for (int nb = 0; nb < n_blocks; ++nb) {
    const int stage = nb & 1;
    if (nb + 1 < n_blocks) {
      const int n1 = (nb + 1) * BN;
      load_tile<T, BN, D, NT>(sK + (stage ^ 1) * BN * D, k + n1 * p.ks[2], p.ks[2], p.tkv - n1,
                              p.d, tid);
      load_tile<T, BN, D, NT>(sV + (stage ^ 1) * BN * D, v + n1 * p.vs[2], p.vs[2], p.tkv - n1,
                              p.d, tid);
    }
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const uint32_t kb = smem_u32(sK + stage * BN * D) + ln.row_b * RB;
    const uint32_t va = smem_u32(sV + stage * BN * D) + ln.row_a * RB;

    float s[BN / 8][4];
#pragma unroll
    for (int i = 0; i < BN / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
    mma_rows_rows<T, D / 16, BN / 8, RB>(s, qa, r_base, ln, kb);
    const int n0 = nb * BN;
    const bool edge = n0 + BN > p.tkv;
    const bool general = p.mask_kind >= kBool || (p.mask_kind == kCausal && n0 + BN - 1 > m0 + off);
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = n0 + nt * 8 + 2 * t + (e & 1), i = e < 2 ? i0 : i1;
        float x = s[nt][e];
        if (general) {
          x = (j < p.tkv && i < p.tq) ? masked_score<T>(p, mask_bh, x, i, j, off)
                                      : x * p.scale_log2;
        } else {
          x *= p.scale_log2;
        }
        if (edge && j >= p.tkv) x = -INFINITY;
        s[nt][e] = x;
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = mrow[r];
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
      mx = quad_max(mx);
      const float mu = mx == -INFINITY ? 0.f : mx;
      const float alpha = ex2(mrow[r] - mu);
      mrow[r] = mx;
      float sum = 0.f;
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt) {
        s[nt][2 * r] = ex2(s[nt][2 * r] - mu);
        s[nt][2 * r + 1] = ex2(s[nt][2 * r + 1] - mu);
        sum += s[nt][2 * r] + s[nt][2 * r + 1];
      }
      lrow[r] = lrow[r] * alpha + sum;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        acc[dt][2 * r] *= alpha;
        acc[dt][2 * r + 1] *= alpha;
      }
    }
    mma_frags_rows<T, BN / 8, D / 8, RB>(acc, s, va, 0, ln);
    __syncthreads();
  }
  cp_async_wait<0>();

  T* o = static_cast<T*>(p.o) + (static_cast<int64_t>(b) * p.hq + h) * p.tq * p.d;
  float* lse = p.lse + (static_cast<int64_t>(b) * p.hq + h) * p.tq;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = quad_sum(lrow[r]), m = mrow[r];
    float scale_o = 1.f;
    if (p.sinks) {
      const float sk = p.sinks[h] * kLog2e;
      const float mn = fmaxf(m, sk);
      const float alpha = ex2(m - mn);
      l = l * alpha + ex2(sk - mn);
      scale_o = alpha;
      m = mn;
    }
    const float inv = l > 0.f ? scale_o / l : 0.f;
    const int i = r == 0 ? i0 : i1;
    if (i < p.tq) {
      if (t == 0) lse[i] = m == kLowest ? kLowest : (m + log2f(l)) * kLn2;
      T* orow = o + static_cast<int64_t>(i) * p.d;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        const int c = dt * 8 + 2 * t;
        if (c < p.d) {
          *reinterpret_cast<uint32_t*>(orow + c) =
              pack2<T>(acc[dt][2 * r] * inv, acc[dt][2 * r + 1] * inv);
        }
      }
    }
  }
#endif
}

// ---- backward

// delta[row] = sum_d dO o - dlse[row]; one warp per row.
template <typename T>
__global__ void bwd_delta_kernel(const BwdParams p) {
  const int64_t row = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  const int64_t rows = static_cast<int64_t>(p.f.b) * p.f.hq * p.f.tq;
  if (row >= rows) return;
  const int i = row % p.f.tq;
  const int h = (row / p.f.tq) % p.f.hq;
  const int b = row / (static_cast<int64_t>(p.f.tq) * p.f.hq);
  const T* o = static_cast<const T*>(p.f.o) + row * p.f.d;
  const T* dout = static_cast<const T*>(p.dout) + b * p.dos[0] + h * p.dos[1] + i * p.dos[2];
  float sum = 0.f;
  for (int c = lane; c < p.f.d; c += 32) sum += to_f(o[c]) * to_f(dout[c]);
#pragma unroll
  for (int s = 16; s > 0; s /= 2) sum += __shfl_xor_sync(0xffffffff, sum, s);
  if (lane == 0) p.delta[row] = sum - (p.dlse ? p.dlse[row] : 0.f);
}

template <typename T, int D, int W, int BM_>
struct BwdConfig {
  static constexpr int BN = 16 * W, BM = BM_, NT = 32 * W;
  static constexpr int SDS = BM + 8;  // padded row of dS^T
  static constexpr int smem = (2 * BN * D + 4 * BM * D + BN * SDS) * sizeof(T) + 4 * BM * 4;
};

template <typename T, int D, int W, int BM_>
__global__ void __launch_bounds__(32 * W) bwd_kernel(const BwdParams bp) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using Cfg = BwdConfig<T, D, W, BM_>;
  constexpr int BN = Cfg::BN, BM = Cfg::BM, NT = Cfg::NT, SDS = Cfg::SDS;
  const FwdParams& p = bp.f;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sK = reinterpret_cast<T*>(smem);
  T* sV = sK + BN * D;
  T* sQ = sV + BN * D;        // 2 stages
  T* sdO = sQ + 2 * BM * D;   // 2 stages
  T* sdS = sdO + 2 * BM * D;  // (BN keys, BM queries), rows of SDS
  float* sL = reinterpret_cast<float*>(sdS + BN * SDS);  // 2 stages of log2 lse
  float* sDl = sL + 2 * BM;                             // 2 stages of delta
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int nb = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int rep = p.hq / p.hkv, off = p.tkv - p.tq, n0 = nb * BN;
  const T* k = static_cast<const T*>(p.k) + b * p.ks[0] + hk * p.ks[1] + n0 * p.ks[2];
  const T* v = static_cast<const T*>(p.v) + b * p.vs[0] + hk * p.vs[1] + n0 * p.vs[2];
  load_tile<T, BN, D, NT>(sK, k, p.ks[2], p.tkv - n0, p.d, tid);
  load_tile<T, BN, D, NT>(sV, v, p.vs[2], p.tkv - n0, p.d, tid);
  const int m_blocks = (p.tq + BM - 1) / BM;
  const int m_begin = (p.mask_kind == kCausal && off >= 0) ? min(m_blocks, max(0, n0 - off) / BM) : 0;
  const int per_head = m_blocks - m_begin, iters = per_head * rep;
  const float inv_tkv = 1.f / p.tkv;

  // Issues the tile loads of iteration it into stage st, and reads its row
  // statistics (log2 lse, delta) of row tid into l, dl (stored later, so that
  // the reads' latency hides behind the iteration's work).
  auto prefetch = [&](int it, int st, float& l, float& dl) {
    const int h = hk * rep + it / per_head, m0 = (m_begin + it % per_head) * BM;
    const T* q = static_cast<const T*>(p.q) + b * p.qs[0] + h * p.qs[1] + m0 * p.qs[2];
    const T* dout = static_cast<const T*>(bp.dout) + b * bp.dos[0] + h * bp.dos[1] + m0 * bp.dos[2];
    load_tile<T, BM, D, NT>(sQ + st * BM * D, q, p.qs[2], p.tq - m0, p.d, tid);
    load_tile<T, BM, D, NT>(sdO + st * BM * D, dout, bp.dos[2], p.tq - m0, p.d, tid);
    const int64_t row0 = (static_cast<int64_t>(b) * p.hq + h) * p.tq + m0;
    l = INFINITY;
    dl = 0.f;
    if (tid < BM && m0 + tid < p.tq) {
      l = p.lse[row0 + tid];
      dl = bp.delta[row0 + tid];
    }
  };
  auto store_stats = [&](int st, float l, float dl) {
    if (tid < BM) {
      sL[st * BM + tid] = l <= 0.5f * kLowest ? kLowest : l * kLog2e;
      sDl[st * BM + tid] = dl;
    }
  };
  static_assert(BM <= NT, "one row of statistics per thread");

  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[i][e] = dv[i][e] = 0.f;
  }
  if (iters > 0) {
    float l, dl;
    prefetch(0, 0, l, dl);
    store_stats(0, l, dl);
  }
  cp_async_commit();
  const int kw = warp * 16;
  const int j0 = n0 + kw + g, j1 = j0 + 8;
  constexpr int RB = D * sizeof(T);
  const Lanes ln(lane);
  const uint32_t ka = smem_u32(sK) + ln.row_a * RB, va = smem_u32(sV) + ln.row_a * RB;
  const uint32_t dsb = smem_u32(sdS) + (ln.row_b * SDS + ((lane >> 3) & 1) * 8) * sizeof(T);

  for (int it = 0; it < iters; ++it) {
    const int st = it & 1;
    float next_l = 0.f, next_dl = 0.f;
    if (it + 1 < iters) prefetch(it + 1, st ^ 1, next_l, next_dl);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const int h = hk * rep + it / per_head, m0 = (m_begin + it % per_head) * BM;
    const uint32_t qa = smem_u32(sQ + st * BM * D) + ln.row_a * RB;
    const uint32_t qb = smem_u32(sQ + st * BM * D) + ln.row_b * RB;
    const uint32_t doa = smem_u32(sdO + st * BM * D) + ln.row_a * RB;
    const uint32_t dob = smem_u32(sdO + st * BM * D) + ln.row_b * RB;
    const float* cL = sL + st * BM;
    const float* cDl = sDl + st * BM;
    const unsigned char* mask_bh = nullptr;
    if (p.mask_kind >= kBool) {
      size_t es = p.mask_kind == kBool ? 1 : sizeof(T);
      mask_bh = static_cast<const unsigned char*>(p.mask) + (b * p.ms[0] + h * p.ms[1]) * es;
    }

    // S^T = K Q^T for the warp's 16 keys.
    float s[BM / 8][4];
#pragma unroll
    for (int i = 0; i < BM / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
    mma_rows_rows<T, D / 16, BM / 8, RB>(s, ka, kw, ln, qb);
    // P^T; hidden[] remembers the entries whose gradient is cut (causal, boolean).
    uint32_t hidden = 0;
#pragma unroll
    for (int nt = 0; nt < BM / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int ic = nt * 8 + 2 * t + (e & 1), i = m0 + ic, j = e < 2 ? j0 : j1;
        const float l2 = cL[ic];
        float pv = 0.f;
        if (i < p.tq && j < p.tkv) {
          float x = masked_score<T>(p, mask_bh, s[nt][e], i, j, off);
          if (p.mask_kind == kCausal || p.mask_kind == kBool) {
            if (x == kLowest) hidden |= 1u << (nt * 4 + e);
          }
          pv = l2 == kLowest ? inv_tkv : ex2(x - l2);
        }
        s[nt][e] = pv;
      }
    }
    // dV += P^T dO
    mma_frags_rows<T, BM / 8, D / 8, RB>(dv, s, doa, 0, ln);
    // dP^T = V dO^T
    float dp[BM / 8][4];
#pragma unroll
    for (int i = 0; i < BM / 8; ++i) dp[i][0] = dp[i][1] = dp[i][2] = dp[i][3] = 0.f;
    mma_rows_rows<T, D / 16, BM / 8, RB>(dp, va, kw, ln, dob);
    // dS^T = P^T (dP^T - delta), kept in s, stored to shared memory.
#pragma unroll
    for (int nt = 0; nt < BM / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int ic = nt * 8 + 2 * t + (e & 1);
        float ds = s[nt][e] * (dp[nt][e] - cDl[ic]);
        if (hidden & (1u << (nt * 4 + e))) ds = 0.f;
        s[nt][e] = ds;
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        *reinterpret_cast<uint32_t*>(sdS + (kw + g + 8 * r) * SDS + nt * 8 + 2 * t) =
            pack2<T>(s[nt][2 * r], s[nt][2 * r + 1]);
      }
    }
    // dK += dS^T Q
    mma_frags_rows<T, BM / 8, D / 8, RB>(dk, s, qa, 0, ln);
    __syncthreads();
    // dQ += scale dS K, added atomically: warp w takes query rows 16 (w % RG)
    // and a slice of the head dim.
    {
      constexpr int RG = BM / 16, DS = W / RG, D2 = D / 16 / DS;
      const int qw = (warp % RG) * 16, dbeg = (warp / RG) * D2;
      uint32_t a[BN / 16][4];
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        ldsm_x4_t(a[kk], dsb + (kk * 16 * SDS + qw) * sizeof(T));
      }
      const int iq0 = m0 + qw + g;
      float* dq = bp.dq_acc + ((static_cast<int64_t>(b) * p.hq + h) * p.tq) * p.d;
      const float sc = p.scale;
#pragma unroll
      for (int dd = 0; dd < D2; ++dd) {
        const int d2 = dbeg + dd;
        float c[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
          uint32_t bb[4];
          ldsm_x4_t(bb, at<RB>(ka, kk * 16, ln.y_a, d2));
          mma16816<T>(c[0], a[kk], bb[0], bb[1]);
          mma16816<T>(c[1], a[kk], bb[2], bb[3]);
        }
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          const int col = d2 * 16 + n * 8 + 2 * t;
          if (col >= p.d) continue;
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int i = iq0 + 8 * r;
            if (i >= p.tq) continue;
            float* dst = dq + static_cast<int64_t>(i) * p.d + col;
#if __CUDA_ARCH__ >= 900
            atomicAdd(reinterpret_cast<float2*>(dst),
                      make_float2(c[n][2 * r] * sc, c[n][2 * r + 1] * sc));
#else
            atomicAdd(dst, c[n][2 * r] * sc);
            atomicAdd(dst + 1, c[n][2 * r + 1] * sc);
#endif
          }
        }
      }
    }
    if (it + 1 < iters) store_stats(st ^ 1, next_l, next_dl);
    __syncthreads();
  }
  cp_async_wait<0>();

  const float sc = p.scale;
  T* dkp = static_cast<T*>(bp.dk) + ((static_cast<int64_t>(b) * p.hkv + hk) * p.tkv) * p.d;
  T* dvp = static_cast<T*>(bp.dv) + ((static_cast<int64_t>(b) * p.hkv + hk) * p.tkv) * p.d;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int j = r == 0 ? j0 : j1;
    if (j >= p.tkv) continue;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      const int c = dt * 8 + 2 * t;
      if (c < p.d) {
        *reinterpret_cast<uint32_t*>(dkp + static_cast<int64_t>(j) * p.d + c) =
            pack2<T>(dk[dt][2 * r] * sc, dk[dt][2 * r + 1] * sc);
        *reinterpret_cast<uint32_t*>(dvp + static_cast<int64_t>(j) * p.d + c) =
            pack2<T>(dv[dt][2 * r], dv[dt][2 * r + 1]);
      }
    }
  }
#endif
}

template <typename T>
__global__ void cast_f32_kernel(const float* x, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = from_f<T>(x[i]);
  }
}


// ---- decode (split keys)

// Rows of one (batch, k/v head): the Hq / Hkv query heads of its group times
// Tq queries, row r = (head in group) * Tq + query.
constexpr int kDecodeRows = 16, kDecodeBN = 64, kDecodeStages = 3, kDecodeWarps = 4;

struct DecodeSplit {
  int splits, chunk;  // chunk: keys per split, a multiple of kDecodeBN
};

template <typename T, int D>
struct DecodeConfig {
  static constexpr int NT = 32 * kDecodeWarps;
  static constexpr int smem_tiles = (kDecodeRows * D + 2 * kDecodeStages * kDecodeBN * D) * sizeof(T);
  // The warps' partial results merged through shared memory (over the tiles).
  static constexpr int smem_merge = kDecodeWarps * kDecodeRows * (D + 2) * 4;
  static constexpr int smem = smem_tiles > smem_merge ? smem_tiles : smem_merge;
};

// o and lse of each (batch, query head, query) from the splits' partials:
// a block of kCombineThreads a row, the splits' weights l 2^(m - max) in
// shared memory (splits floats). The partials are read through L2 (__ldcg):
// the decoding kernel's last block of a group reads what other blocks wrote.
constexpr int kCombineThreads = 128;

template <bool Max>
__device__ __forceinline__ float block_reduce(float x, float* red) {
#pragma unroll
  for (int s = 16; s > 0; s /= 2) {
    float y = __shfl_xor_sync(0xffffffff, x, s);
    x = Max ? fmaxf(x, y) : x + y;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) red[warp] = x;
  __syncthreads();
  x = red[0];
  for (int w = 1; w < kCombineThreads / 32; ++w) x = Max ? fmaxf(x, red[w]) : x + red[w];
  return x;
}

// Where row `row` (batch, query head, query) of o finds its partial results:
// its query head h, its row r among the kDecodeRows of its k/v head, and the
// first of its (batch, k/v head)'s splits.
struct CombinePlace {
  int h, r;
  int64_t part0;
};

__device__ __forceinline__ CombinePlace combine_place(const FwdParams& p, int splits,
                                                      int64_t row) {
  const int i = row % p.tq, h = (row / p.tq) % p.hq, b = row / (static_cast<int64_t>(p.tq) * p.hq);
  const int rep = p.hq / p.hkv, hk = h / rep;
  return {h, (h % rep) * p.tq + i, (static_cast<int64_t>(b) * p.hkv + hk) * splits};
}

// Row `row` (batch, query head, query) of o and lse, by the kCombineThreads
// threads of a block; wts: splits floats of shared memory, red: a float a warp.
template <typename T>
__device__ void combine_row(const FwdParams& p, int splits, const float* po, const float* pm,
                            const float* pl, int64_t row, float* wts, float* red) {
  const int tid = threadIdx.x;
  const auto [h, r, part0] = combine_place(p, splits, row);
  float m = -INFINITY;
  for (int sp = tid; sp < splits; sp += kCombineThreads) {
    const int64_t q = (part0 + sp) * kDecodeRows + r;
    if (__ldcg(pl + q) > 0.f) m = fmaxf(m, __ldcg(pm + q));
  }
  const float sk = p.sinks ? p.sinks[h] * kLog2e : -INFINITY;
  const float mt = fmaxf(block_reduce<true>(m, red), sk);
  float l = 0.f;
  for (int sp = tid; sp < splits; sp += kCombineThreads) {
    const int64_t q = (part0 + sp) * kDecodeRows + r;
    const float lq = __ldcg(pl + q);
    const float w = lq > 0.f ? lq * ex2(__ldcg(pm + q) - mt) : 0.f;
    wts[sp] = w;
    l += w;
  }
  l = block_reduce<false>(l, red) + (p.sinks ? ex2(sk - mt) : 0.f);
  const float inv = l > 0.f ? 1.f / l : 0.f;
  T* o = static_cast<T*>(p.o) + row * p.d;
  for (int c = tid; c < p.d; c += kCombineThreads) {
    float acc = 0.f;
#pragma unroll 8
    for (int sp = 0; sp < splits; ++sp) {
      acc += wts[sp] * __ldcg(po + ((part0 + sp) * kDecodeRows + r) * p.d + c);
    }
    o[c] = from_f<T>(acc * inv);
  }
  if (tid == 0) p.lse[row] = mt == kLowest ? kLowest : (mt + log2f(l)) * kLn2;
}

// The same by one warp, merging the splits in one pass (online, as the
// softmax itself): the loads do not wait on one another, so the few round
// trips to L2 overlap. Lane l takes columns l, l + 32, ... of the row.
template <typename T, int D>
__device__ __forceinline__ void combine_row_warp(const FwdParams& p, int splits, const float* po,
                                                 const float* pm, const float* pl, int64_t row,
                                                 int lane) {
  const auto [h, r, part0] = combine_place(p, splits, row);
  constexpr int C = D / 32;
  float m = -INFINITY, l = 0.f, acc[C];
#pragma unroll
  for (int k = 0; k < C; ++k) acc[k] = 0.f;
#pragma unroll 4
  for (int sp = 0; sp < splits; ++sp) {
    const int64_t q = (part0 + sp) * kDecodeRows + r;
    const float lq = __ldcg(pl + q), mq = __ldcg(pm + q);
    float o[C];
#pragma unroll
    for (int k = 0; k < C; ++k) {
      const int c = lane + 32 * k;
      o[k] = c < p.d ? __ldcg(po + q * p.d + c) : 0.f;
    }
    const bool valid = lq > 0.f;
    const float mn = valid ? fmaxf(m, mq) : m;
    const float a = m == mn ? 1.f : ex2(m - mn);
    const float w = valid ? lq * ex2(mq - mn) : 0.f;
    m = mn;
    l = l * a + w;
#pragma unroll
    for (int k = 0; k < C; ++k) acc[k] = acc[k] * a + w * o[k];
  }
  if (p.sinks) {
    const float sk = p.sinks[h] * kLog2e, mn = fmaxf(m, sk);
    const float a = m == mn ? 1.f : ex2(m - mn);
    l = l * a + ex2(sk - mn);
#pragma unroll
    for (int k = 0; k < C; ++k) acc[k] *= a;
    m = mn;
  }
  const float inv = l > 0.f ? 1.f / l : 0.f;
  T* o = static_cast<T*>(p.o) + row * p.d;
#pragma unroll
  for (int k = 0; k < C; ++k) {
    const int c = lane + 32 * k;
    if (c < p.d) o[c] = from_f<T>(acc[k] * inv);
  }
  if (lane == 0) p.lse[row] = m == kLowest ? kLowest : (m + log2f(l)) * kLn2;
}

template <typename T>
__global__ void __launch_bounds__(kCombineThreads)
    decode_combine_kernel(const FwdParams p, int splits, const float* po, const float* pm,
                          const float* pl) {
  extern __shared__ float wts[];
  __shared__ float red[kCombineThreads / 32];
  combine_row<T>(p, splits, po, pm, pl, blockIdx.x, wts, red);
}

// Partial results of split s: po (rows, d) normalised, pm (log2 max), pl (sum).
// With counters (a zeroed one per batch and k/v head), the last block of a
// group to finish combines the group's rows, a warp a row (combine_row_warp):
// no second kernel.
template <typename T, int D>
__global__ void __launch_bounds__(32 * kDecodeWarps)
    decode_kernel(const FwdParams p, int chunk, float* po, float* pm, float* pl,
                  unsigned* counters) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using Cfg = DecodeConfig<T, D>;
  constexpr int NT = Cfg::NT, BN = kDecodeBN, ST = kDecodeStages, R = kDecodeRows;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);
  T* sK = sQ + R * D;
  T* sV = sK + ST * BN * D;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int split = blockIdx.x, hk = blockIdx.y, b = blockIdx.z, splits = gridDim.x;
  const int rep = p.hq / p.hkv, rows = rep * p.tq, off = p.tkv - p.tq;
  const int k_begin = split * chunk, k_end = min(p.tkv, k_begin + chunk);
  const int tiles = k_end > k_begin ? (k_end - k_begin + BN - 1) / BN : 0;
  const T* k = static_cast<const T*>(p.k) + b * p.ks[0] + hk * p.ks[1];
  const T* v = static_cast<const T*>(p.v) + b * p.vs[0] + hk * p.vs[1];
  constexpr int CH = D / 8;
  for (int idx = tid; idx < R * CH; idx += NT) {
    const int r = idx / CH, c = (idx % CH) * 8;
    const bool ok = r < rows && c < p.d;
    const T* src = static_cast<const T*>(p.q);
    if (ok) src += b * p.qs[0] + (hk * rep + r / p.tq) * p.qs[1] + (r % p.tq) * p.qs[2] + c;
    cp_async16(smem_u32(sQ + sw<D>(r, c)), src, ok);
  }
  auto load = [&](int tile) {
    const int n0 = k_begin + tile * BN, st = tile % ST;
    load_tile<T, BN, D, NT>(sK + st * BN * D, k + n0 * p.ks[2], p.ks[2], k_end - n0, p.d, tid);
    load_tile<T, BN, D, NT>(sV + st * BN * D, v + n0 * p.vs[2], p.vs[2], k_end - n0, p.d, tid);
  };
#pragma unroll
  for (int i = 0; i < ST - 1; ++i) {
    if (i < tiles) load(i);
    cp_async_commit();
  }
  // Rows g and g + 8 of this lane: head in group, query.
  int hr[2], qi[2];
  const unsigned char* mrow[2] = {nullptr, nullptr};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    hr[r] = row < rows ? row / p.tq : 0;
    qi[r] = row < rows ? row % p.tq : 0;
    if (p.mask_kind >= kBool) {
      size_t es = p.mask_kind == kBool ? 1 : sizeof(T);
      mrow[r] = static_cast<const unsigned char*>(p.mask) +
                (b * p.ms[0] + (hk * rep + hr[r]) * p.ms[1]) * es;
    }
  }
  constexpr int RB = D * sizeof(T);
  const Lanes ln(lane);
  float acc[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
  float mx[2] = {-INFINITY, -INFINITY}, lsum[2] = {0.f, 0.f};
  uint32_t qf[D / 16][4];

  for (int tile = 0; tile < tiles; ++tile) {
    if (tile + ST - 1 < tiles) load(tile + ST - 1);
    cp_async_commit();
    cp_async_wait<ST - 1>();
    __syncthreads();
    if (tile == 0) {
      const uint32_t qa = smem_u32(sQ) + ln.row_a * RB;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) ldsm_x4(qf[kk], at<RB>(qa, 0, ln.y_a, kk));
    }
    const int st = tile % ST, n0 = k_begin + tile * BN;
    const uint32_t kb = smem_u32(sK + st * BN * D) + ln.row_b * RB;
    const uint32_t va = smem_u32(sV + st * BN * D) + ln.row_a * RB;
    float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t bb[4];
      ldsm_x4(bb, at<RB>(kb, warp * 16, ln.y_b, kk));
      mma16816<T>(s[0], qf[kk], bb[0], bb[1]);
      mma16816<T>(s[1], qf[kk], bb[2], bb[3]);
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = n0 + warp * 16 + nt * 8 + 2 * t + (e & 1), r = e >> 1;
        float x = s[nt][e] * p.scale_log2;
        if (j >= k_end) {
          x = -INFINITY;
        } else if (p.mask_kind == kCausal) {
          if (j > qi[r] + off) x = kLowest;
        } else if (p.mask_kind == kBool) {
          if (!mrow[r][qi[r] * p.ms[2] + j * p.ms[3]]) x = kLowest;
        } else if (p.mask_kind == kAdditive) {
          const T* m = reinterpret_cast<const T*>(mrow[r]);
          x = fmaxf(x + to_f(m[qi[r] * p.ms[2] + j * p.ms[3]]) * kLog2e, kLowest);
        }
        s[nt][e] = x;
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float m = fmaxf(mx[r], fmaxf(fmaxf(s[0][2 * r], s[0][2 * r + 1]),
                                   fmaxf(s[1][2 * r], s[1][2 * r + 1])));
      m = quad_max(m);
      const float mu = m == -INFINITY ? 0.f : m;
      const float alpha = ex2(mx[r] - mu);
      mx[r] = m;
      float sum = 0.f;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        s[nt][2 * r] = ex2(s[nt][2 * r] - mu);
        s[nt][2 * r + 1] = ex2(s[nt][2 * r + 1] - mu);
        sum += s[nt][2 * r] + s[nt][2 * r + 1];
      }
      lsum[r] = lsum[r] * alpha + sum;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        acc[dt][2 * r] *= alpha;
        acc[dt][2 * r + 1] *= alpha;
      }
    }
    mma_frags_rows<T, 2, D / 8, RB>(acc, s, va, warp * 16, ln);
    __syncthreads();
  }
  cp_async_wait<0>();
  __syncthreads();
  // Merge the warps: (m, l) and unnormalised o of each row through shared memory.
  float* so = reinterpret_cast<float*>(smem);        // (warps, rows, D)
  float* sm = so + kDecodeWarps * R * D;              // (warps, rows)
  float* sl = sm + kDecodeWarps * R;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    const float l = quad_sum(lsum[r]);
    if (t == 0) {
      sm[warp * R + row] = mx[r];
      sl[warp * R + row] = l;
    }
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      so[(warp * R + row) * D + dt * 8 + 2 * t] = acc[dt][2 * r];
      so[(warp * R + row) * D + dt * 8 + 2 * t + 1] = acc[dt][2 * r + 1];
    }
  }
  __syncthreads();
  const int64_t part = (static_cast<int64_t>(b) * p.hkv + hk) * splits + split;
  for (int idx = tid; idx < rows * p.d; idx += NT) {
    const int row = idx / p.d, c = idx % p.d;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) m = fmaxf(m, sm[w * R + row]);
    float l = 0.f, o = 0.f;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float f = sl[w * R + row] == 0.f ? 0.f : ex2(sm[w * R + row] - m);
      l += sl[w * R + row] * f;
      o += so[(w * R + row) * D + c] * f;
    }
    po[(part * R + row) * p.d + c] = l > 0.f ? o / l : 0.f;
    if (c == 0) {
      pm[part * R + row] = m;
      pl[part * R + row] = l;
    }
  }
  if (!counters) return;
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  unsigned* counter = counters + static_cast<int64_t>(b) * p.hkv + hk;
  if (tid == 0) last = atomicAdd(counter, 1u) == static_cast<unsigned>(splits - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int r = warp; r < rows; r += kDecodeWarps) {
    const int64_t row = (static_cast<int64_t>(b) * p.hq + hk * rep + r / p.tq) * p.tq + r % p.tq;
    combine_row_warp<T, D>(p, splits, po, pm, pl, row, lane);
  }
  if (tid == 0) *counter = 0u;
#endif
}

// ---- launches (host side)

// The padded head dim of a kernel for head dim d (a multiple of 8): 64, 128
// or 256; 0 when none covers it.
inline int padded_dim(int d) {
  if (d <= 0 || d % 8) return 0;
  return d <= 64 ? 64 : d <= 128 ? 128 : d <= 256 ? 256 : 0;
}
// Whether the backward kernel covers head dim d.
inline bool backward_covers(int d) { int dp = padded_dim(d); return dp && dp <= 128; }

// Whether the split-key decoding kernels take p: every query row of a k/v
// head's group in one m16 tile, keys enough to split, head dims to 128.
inline bool use_decode(const FwdParams& p) {
  return (p.hq / p.hkv) * p.tq <= kDecodeRows && p.tkv >= 512 && padded_dim(p.d) <= 128;
}

// Splits for p on a GPU of `sms` multiprocessors: about one wave of two
// blocks a multiprocessor, chunks of whole key tiles.
inline DecodeSplit decode_split(const FwdParams& p, int sms) {
  const int64_t groups = static_cast<int64_t>(p.b) * p.hkv;
  const int tiles = (p.tkv + kDecodeBN - 1) / kDecodeBN;
  int splits = static_cast<int>(std::min<int64_t>(tiles, std::max<int64_t>(1, 2 * sms / groups)));
  const int chunk = ((tiles + splits - 1) / splits) * kDecodeBN;
  return {(p.tkv + chunk - 1) / chunk, chunk};
}

// Whether the decoding kernel's last blocks combine the splits (given
// counters): when a group's partials are few enough for one block to read
// quickly; else a kernel of a block a row does.
inline bool decode_combines_in_place(const FwdParams& p, DecodeSplit sp) {
  const int64_t rows = (p.hq / p.hkv) * p.tq;
  return rows * sp.splits * p.d <= (int64_t{1} << 16);
}

// Floats of scratch the decoding kernels need for p split as sp.
inline int64_t decode_scratch_floats(const FwdParams& p, DecodeSplit sp) {
  return static_cast<int64_t>(p.b) * p.hkv * sp.splits * kDecodeRows * (p.d + 2);
}

// A kernel's opt-in to more than 48 KB of dynamic shared memory holds for the
// process on a device and costs the host about 2 us a call (a decoding step
// launches the attention once a layer): made once per device, `done` holding
// a bit per device for the kernel.
inline cudaError_t opt_in_smem(std::atomic<uint64_t>& done, const void* kern, int bytes) {
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  const uint64_t bit = uint64_t{1} << (device & 63);
  if (done.load(std::memory_order_acquire) & bit) return cudaSuccess;
  e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess) done.fetch_or(bit, std::memory_order_acq_rel);
  return e;
}

// counters: null, or a zeroed counter per (batch, k/v head) when
// decode_combines_in_place(p, sp).
template <typename T, int D>
cudaError_t launch_decode(const FwdParams& p, DecodeSplit sp, float* scratch, unsigned* counters,
                          cudaStream_t st) {
  using Cfg = DecodeConfig<T, D>;
  auto kern = decode_kernel<T, D>;
  static std::atomic<uint64_t> opted{0};
  cudaError_t e = opt_in_smem(opted, reinterpret_cast<const void*>(kern), Cfg::smem);
  if (e != cudaSuccess) return e;
  const int64_t parts = static_cast<int64_t>(p.b) * p.hkv * sp.splits * kDecodeRows;
  float* po = scratch;
  float* pm = po + parts * p.d;
  float* pl = pm + parts;
  kern<<<dim3(sp.splits, p.hkv, p.b), Cfg::NT, Cfg::smem, st>>>(p, sp.chunk, po, pm, pl, counters);
  if ((e = cudaGetLastError()) != cudaSuccess || counters) return e;
  const int64_t rows = static_cast<int64_t>(p.b) * p.hq * p.tq;
  decode_combine_kernel<T><<<static_cast<unsigned>(rows), kCombineThreads,
                             sp.splits * sizeof(float), st>>>(p, sp.splits, po, pm, pl);
  return cudaGetLastError();
}

template <typename T>
cudaError_t decode(const FwdParams& p, DecodeSplit sp, float* scratch, unsigned* counters,
                   cudaStream_t st) {
  switch (padded_dim(p.d)) {
    case 64: return launch_decode<T, 64>(p, sp, scratch, counters, st);
    case 128: return launch_decode<T, 128>(p, sp, scratch, counters, st);
    default: return cudaErrorInvalidValue;
  }
}

template <typename T, int D, int W, int BN>
cudaError_t launch_fwd(const FwdParams& p, cudaStream_t st) {
  using Cfg = FwdConfig<T, D, W, BN>;
  auto kern = fwd_kernel<T, D, W, BN>;
  static std::atomic<uint64_t> opted{0};
  cudaError_t e = opt_in_smem(opted, reinterpret_cast<const void*>(kern), Cfg::smem);
  if (e != cudaSuccess) return e;
  dim3 grid((p.tq + Cfg::BM - 1) / Cfg::BM, p.hq, p.b);
  kern<<<grid, Cfg::NT, Cfg::smem, st>>>(p);
  return cudaGetLastError();
}

template <typename T>
cudaError_t forward(const FwdParams& p, cudaStream_t st) {
  switch (padded_dim(p.d)) {
    case 64: return launch_fwd<T, 64, 4, 64>(p, st);
    case 128: return launch_fwd<T, 128, 8, 64>(p, st);
    case 256: return launch_fwd<T, 256, 4, 32>(p, st);
    default: return cudaErrorInvalidValue;
  }
}

template <typename T, int D, int W, int BM>
cudaError_t launch_bwd(const BwdParams& p, cudaStream_t st) {
  using Cfg = BwdConfig<T, D, W, BM>;
  auto kern = bwd_kernel<T, D, W, BM>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::smem);
  if (e != cudaSuccess) return e;
  dim3 grid((p.f.tkv + Cfg::BN - 1) / Cfg::BN, p.f.hkv, p.f.b);
  kern<<<grid, Cfg::NT, Cfg::smem, st>>>(p);
  return cudaGetLastError();
}

// dq, dk, dv of p (delta and dq_acc are scratch of B Hq Tq and B Hq Tq d floats).
template <typename T>
cudaError_t backward(const BwdParams& p, cudaStream_t st) {
  const int64_t rows = static_cast<int64_t>(p.f.b) * p.f.hq * p.f.tq;
  cudaError_t e = cudaMemsetAsync(p.dq_acc, 0, rows * p.f.d * sizeof(float), st);
  if (e != cudaSuccess) return e;
  bwd_delta_kernel<T><<<static_cast<unsigned>((rows * 32 + 255) / 256), 256, 0, st>>>(p);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  switch (padded_dim(p.f.d)) {
    case 64: e = launch_bwd<T, 64, 4, 64>(p, st); break;
    case 128: e = launch_bwd<T, 128, 4, 32>(p, st); break;
    default: return cudaErrorInvalidValue;
  }
  if (e != cudaSuccess) return e;
  const int64_t n = rows * p.f.d;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65535));
  cast_f32_kernel<T><<<blocks, 256, 0, st>>>(p.dq_acc, static_cast<T*>(p.dq), n);
  return cudaGetLastError();
}

#endif  // __CUDACC__

}  // namespace tessera::gpu::attention
