// eval_cpu of Quantize, Dequantize and QuantizedMatmul (Note [Affine
// quantization] in backend/common/quantize.h).
//
// QuantizedMatmul dequantizes w a tile of rows at a time into a float buffer
// (double for float64) and multiplies it with BLAS: for transpose, a tile of
// rows of W (N, K) gives a block of output columns; otherwise a tile of rows
// of W (K, N) is accumulated into the whole output.

#include <algorithm>
#include <cstring>
#include <vector>

#include "tessera/backend/common/quantize.h"
#include "tessera/backend/cpu/blas.h"
#include "tessera/backend/cpu/copy.h"
#include "tessera/core/dispatch.h"
#include "tessera/backend/cpu/threading.h"
#include "tessera/backend/cpu/vector_math.h"
#include "tessera/ops/primitives/quantized.h"

namespace tessera {

namespace {

// Products with at most this many rows of x per weight matrix skip the
// dequantized tile and BLAS.
constexpr int kSmallM = 2;
constexpr int kSmallM4 = 8;

// Whether a row of K values of `bits` takes the dot products of Note [4-bit
// dots] (cpu::q4_group_dots) with float x; such products take up to kSmallM4
// rows of x in small_m_transposed.
bool four_bit_dots(int bits, int64_t K, int group_size) {
  return bits == 4 && K % 64 == 0 && group_size % 32 == 0;
}

using quant::dispatch_float;

void allocate(array& a) { a.set_data(allocator::malloc(a.nbytes())); }

// Dequantizes rows [r0, r1) of a packed matrix into dst (row-major, `values` per row).
template <typename T, typename C>
void dequantize_rows(const uint32_t* w, const T* scales, const T* biases, int64_t r0, int64_t r1,
                     int64_t values, int group_size, int bits, C* dst) {
  const int64_t words = values * bits / 32, groups = values / group_size;
  quant::dispatch_bits(bits, [&](auto b) {
    constexpr int B = decltype(b)::value;
    cpu::parallel_for(r1 - r0, std::max<int64_t>(1, 8192 / values), [&](int64_t a0, int64_t a1) {
      uint32_t q[32];
      for (int64_t r = r0 + a0; r < r0 + a1; ++r) {
        const uint32_t* row = w + r * words;
        C* out = dst + (r - r0) * values;
        for (int64_t g = 0; g < groups; ++g) {
          const C s = static_cast<C>(static_cast<tessera::compute_t<T>>(scales[r * groups + g]));
          const C z = static_cast<C>(static_cast<tessera::compute_t<T>>(biases[r * groups + g]));
          for (int64_t c = g * group_size; c < (g + 1) * group_size; c += 32) {
            quant::unpack32<B>(row + c / 32 * B, q);
            for (int i = 0; i < 32; ++i) out[c + i] = s * static_cast<C>(q[i]) + z;
          }
        }
      }
    });
  });
}

// y (M, N) = x (M, K) @ W^T with W (N, K) packed, for a few rows of x: each
// group's values are unpacked once and dotted with every row of x; the bias
// term uses the rows' sums over the group.
template <typename T, typename C, int B>
void small_m_transposed(const C* x, int64_t M, int64_t K, const uint32_t* w, const T* scales,
                        const T* biases, int64_t N, int group_size, C* y) {
  const int64_t words = K * B / 32, groups = K / group_size;
  std::vector<C> xsum(M * groups, C(0));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k = 0; k < K; ++k) xsum[m * groups + k / group_size] += x[m * K + k];
  }
  if constexpr ((B == 2 || B == 4 || B == 8) && std::is_same_v<C, float>) {
    // Float x, values that never straddle two words: the group sums come from
    // the loop compiled per instruction set; for 4 bits, over x permuted once
    // (Note [4-bit dots] in vector_math.cpp).
    const bool q4 = four_bit_dots(B, K, group_size);
    std::vector<float> xt(q4 ? M * K : 0);
    for (int64_t m = 0; q4 && m < M; ++m) cpu::permute_q4_x(x + m * K, K, xt.data() + m * K);
    cpu::parallel_for(N, std::max<int64_t>(1, 16384 / K), [&](int64_t n0, int64_t n1) {
      std::vector<float> dots(groups);
      for (int64_t n = n0; n < n1; ++n) {
        for (int64_t m = 0; m < M; ++m) {
          if (q4) {
            cpu::q4_group_dots(w + n * words, xt.data() + m * K, K, group_size, dots.data());
          } else {
            cpu::q_group_dots(B, w + n * words, x + m * K, K, group_size, dots.data());
          }
          float acc = 0.f;
          for (int64_t g = 0; g < groups; ++g) {
            using S = tessera::compute_t<T>;
            const float s = static_cast<float>(static_cast<S>(scales[n * groups + g]));
            const float z = static_cast<float>(static_cast<S>(biases[n * groups + g]));
            acc += s * dots[g] + z * xsum[m * groups + g];
          }
          y[m * N + n] = acc;
        }
      }
    });
    return;
  }
  cpu::parallel_for(N, std::max<int64_t>(1, 16384 / K), [&](int64_t n0, int64_t n1) {
    uint32_t q[32];
    C qf[32], acc[kSmallM];
    C lanes[kSmallM][32];  // per-lane partial dot products of one group (vectorizable)
    for (int64_t n = n0; n < n1; ++n) {
      const uint32_t* row = w + n * words;
      for (int64_t m = 0; m < M; ++m) acc[m] = C(0);
      for (int64_t g = 0; g < groups; ++g) {
        for (int64_t m = 0; m < M; ++m) std::fill(lanes[m], lanes[m] + 32, C(0));
        for (int64_t c = g * group_size; c < (g + 1) * group_size; c += 32) {
          quant::unpack32<B>(row + c / 32 * B, q);
          for (int i = 0; i < 32; ++i) qf[i] = static_cast<C>(q[i]);
          for (int64_t m = 0; m < M; ++m) {
            const C* xm = x + m * K + c;
            for (int i = 0; i < 32; ++i) lanes[m][i] += qf[i] * xm[i];
          }
        }
        const C s = static_cast<C>(static_cast<tessera::compute_t<T>>(scales[n * groups + g]));
        const C z = static_cast<C>(static_cast<tessera::compute_t<T>>(biases[n * groups + g]));
        for (int64_t m = 0; m < M; ++m) {
          C dot = C(0);
          for (int i = 0; i < 32; ++i) dot += lanes[m][i];
          acc[m] += s * dot + z * xsum[m * groups + g];
        }
      }
      for (int64_t m = 0; m < M; ++m) y[m * N + n] = acc[m];
    }
  });
}

// y (M, N) = x (M, K) @ W with W (K, N) packed, for a few rows of x: threads
// own blocks of output columns and add x[m, k] * W[k, block] over k.
template <typename T, typename C, int B>
void small_m_plain(const C* x, int64_t M, int64_t K, const uint32_t* w, const T* scales,
                   const T* biases, int64_t N, int group_size, C* y) {
  const int64_t words = N * B / 32, groups = N / group_size;
  std::fill(y, y + M * N, C(0));
  cpu::parallel_for(groups, std::max<int64_t>(1, 16384 / (K * group_size)), [&](int64_t g0, int64_t g1) {
    uint32_t q[32];
    for (int64_t k = 0; k < K; ++k) {
      const uint32_t* row = w + k * words;
      for (int64_t g = g0; g < g1; ++g) {
        const C s = static_cast<C>(static_cast<tessera::compute_t<T>>(scales[k * groups + g]));
        const C z = static_cast<C>(static_cast<tessera::compute_t<T>>(biases[k * groups + g]));
        for (int64_t c = g * group_size; c < (g + 1) * group_size; c += 32) {
          quant::unpack32<B>(row + c / 32 * B, q);
          for (int64_t m = 0; m < M; ++m) {
            const C a = x[m * K + k] * s, bz = x[m * K + k] * z;
            C* ym = y + m * N + c;
            for (int i = 0; i < 32; ++i) ym[i] += a * static_cast<C>(q[i]) + bz;
          }
        }
      }
    }
  });
}

}  // namespace

void Quantize::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array w = cpu::ensure_row_contiguous(inputs[0]);
  for (auto& o : outputs) allocate(o);
  if (w.size() == 0) return;
  const int g = group_size_, bits = bits_;
  const int64_t groups = static_cast<int64_t>(w.size()) / g;
  dispatch_float(w.dtype(), "Quantize", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = tessera::compute_t<T>;
    const T* src = w.data<T>();
    uint32_t* packed = outputs[0].data<uint32_t>();
    T* scales = outputs[1].data<T>();
    T* biases = outputs[2].data<T>();
    cpu::parallel_for(groups, std::max(1, 4096 / g), [&](int64_t a, int64_t b) {
      uint32_t q[32];
      for (int64_t gi = a; gi < b; ++gi) {
        const T* x = src + gi * g;
        C lo = static_cast<C>(x[0]), hi = lo;
        for (int i = 1; i < g; ++i) {
          C v = static_cast<C>(x[i]);
          lo = std::min(lo, v);
          hi = std::max(hi, v);
        }
        C s, z;
        quant::affine_params(lo, hi, bits, s, z);
        scales[gi] = T(s);
        biases[gi] = T(z);
        uint32_t* dst = packed + gi * g * bits / 32;
        for (int c = 0; c < g / 32; ++c) {
          for (int i = 0; i < 32; ++i) q[i] = quant::affine_q(static_cast<C>(x[c * 32 + i]), s, z, bits);
          quant::pack32(q, bits, dst + c * bits);
        }
      }
    });
  });
}

void Dequantize::eval_cpu(const std::vector<array>& inputs, array& out) {
  allocate(out);
  if (out.size() == 0) return;
  array w = cpu::ensure_row_contiguous(inputs[0]);
  array scales = cpu::ensure_row_contiguous(inputs[1]);
  array biases = cpu::ensure_row_contiguous(inputs[2]);
  const int64_t values = out.shape(-1), rows = static_cast<int64_t>(out.size()) / values;
  dispatch_float(out.dtype(), "Dequantize", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = tessera::compute_t<T>;
    if constexpr (std::is_same_v<T, C>) {
      dequantize_rows<T, C>(w.data<uint32_t>(), scales.data<T>(), biases.data<T>(), 0, rows,
                            values, group_size_, bits_, out.data<T>());
    } else {
      std::vector<C> tmp(out.size());
      dequantize_rows<T, C>(w.data<uint32_t>(), scales.data<T>(), biases.data<T>(), 0, rows,
                            values, group_size_, bits_, tmp.data());
      T* dst = out.data<T>();
      for (size_t i = 0; i < tmp.size(); ++i) dst[i] = T(tmp[i]);
    }
  });
}

void QuantizedMatmul::eval_cpu(const std::vector<array>& inputs, array& out) {
  allocate(out);
  if (out.size() == 0) return;
  cpu::blas_init();
  array x = cpu::ensure_row_contiguous(inputs[0]);
  array w = cpu::ensure_row_contiguous(inputs[1]);
  array scales = cpu::ensure_row_contiguous(inputs[2]);
  array biases = cpu::ensure_row_contiguous(inputs[3]);
  const int64_t w_rows = w.shape(-2), values = w.shape(-1) * 32 / bits_;
  const int64_t batches = static_cast<int64_t>(w.size()) / (w_rows * w.shape(-1));
  const int64_t K = transpose_ ? values : w_rows, N = transpose_ ? w_rows : values;
  const int64_t M = static_cast<int64_t>(x.size()) / K / batches;
  dispatch_float(out.dtype(), "QuantizedMatmul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const Dtype c_dtype = std::is_same_v<C, double> ? float64 : float32;
    // x and the output in C.
    std::vector<C> x_buf, out_buf;
    const C* xs;
    C* ys;
    if constexpr (std::is_same_v<T, C>) {
      xs = x.data<T>();
      ys = out.data<T>();
    } else {
      x_buf.resize(x.size());
      cpu::cast_contiguous(x.raw_data(), x.dtype(), x_buf.data(), c_dtype, x.size());
      out_buf.resize(out.size());
      xs = x_buf.data();
      ys = out_buf.data();
    }
    if (K == 0) std::fill(ys, ys + out.size(), C(0));
    const int64_t words = w.shape(-1), groups = values / group_size_;
    // 4-bit rows of float x take the dot products of Note [4-bit dots] up to
    // kSmallM4 rows: faster there than a dequantized tile and BLAS.
    const bool small =
        M <= kSmallM || (std::is_same_v<C, float> && transpose_ && M <= kSmallM4 &&
                         four_bit_dots(bits_, values, group_size_));
    if (small && K > 0) {
      quant::dispatch_bits(bits_, [&](auto bits) {
        constexpr int B = decltype(bits)::value;
        for (int64_t b = 0; b < batches; ++b) {
          const uint32_t* wb = w.data<uint32_t>() + b * w_rows * words;
          const T* sb = scales.data<T>() + b * w_rows * groups;
          const T* zb = biases.data<T>() + b * w_rows * groups;
          auto kernel = transpose_ ? small_m_transposed<T, C, B> : small_m_plain<T, C, B>;
          kernel(xs + b * M * K, M, K, wb, sb, zb, N, group_size_, ys + b * M * N);
        }
      });
    }
    // Rows of w per tile: about 1M values, at least 16 rows.
    const int64_t tile_rows = std::min<int64_t>(w_rows, std::max<int64_t>(16, (1 << 20) / values));
    std::vector<C> tile(small ? 0 : tile_rows * values);
    for (int64_t b = 0; b < batches && !small; ++b) {
      const uint32_t* wb = w.data<uint32_t>() + b * w_rows * words;
      const T* sb = scales.data<T>() + b * w_rows * groups;
      const T* zb = biases.data<T>() + b * w_rows * groups;
      const C* xb = xs + b * M * K;
      C* yb = ys + b * M * N;
      for (int64_t r0 = 0; r0 < w_rows; r0 += tile_rows) {
        const int64_t r1 = std::min(w_rows, r0 + tile_rows);
        dequantize_rows<T, C>(wb, sb, zb, r0, r1, values, group_size_, bits_, tile.data());
        if (transpose_) {
          // y[:, r0:r1] = x @ tile^T
          cpu::gemm<C>(false, true, M, r1 - r0, K, C(1), xb, K, tile.data(), values, C(0),
                       yb + r0, N);
        } else {
          // y += x[:, r0:r1] @ tile
          cpu::gemm<C>(false, false, M, N, r1 - r0, C(1), xb + r0, K, tile.data(), values,
                       r0 == 0 ? C(0) : C(1), yb, N);
        }
      }
    }
    if constexpr (!std::is_same_v<T, C>) {
      cpu::cast_contiguous(out_buf.data(), c_dtype, out.raw_data(), out.dtype(), out.size());
    }
  });
}

}  // namespace tessera
