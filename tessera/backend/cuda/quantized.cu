// eval_gpu of Quantize, Dequantize and QuantizedMatmul (Note [Affine
// quantization] in backend/common/quantize.h, shared with the CPU kernels).
//
//   quantize    one thread per group: its extremes, its scale and bias, then
//               its values packed 32 at a time (`bits` words per 32 values)
//   dequantize  one thread per 32 values (quantized.cuh)
//   matmul      with transpose and at most 16 rows of x per weight matrix
//               (decoding): bfloat16 and float16 x on sm_80 and later take the
//               tensor-core kernel of quantized.cuh (Note [Small-M quantized
//               product]); float32 and float64 x with at most 8 rows, one warp
//               per output column reading the packed row once; otherwise w is
//               dequantized into a temporary of the output's dtype and the
//               Matmul primitive's cuBLASLt path multiplies x with it (a
//               transposed view when transpose is true). gather_qmm reaches
//               this through quantized_matmul on the gathered matrices.
// Inputs that are not row-contiguous are copied into dense buffers first.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "tessera/backend/common/quantize.h"
#include "tessera/backend/common/views.h"
#include "tessera/backend/cuda/copy.h"
#include "tessera/backend/cuda/device.h"
#include "tessera/backend/cuda/matmul.h"
#include "tessera/backend/cuda/quantized.cuh"
#include "tessera/backend/cuda/reduce.cuh"
#include "tessera/core/grouped.h"
#include "tessera/ops/primitives/matmul.h"
#include "tessera/ops/primitives/quantized.h"

namespace tessera {

namespace {

using namespace gpu;

constexpr int kThreads = 256;

// a itself when row-contiguous, else a dense device copy.
array dense(const array& a, const Stream& s, const char* op) {
  if (a.flags().row_contiguous) return a;
  array d(a.shape(), a.dtype(), nullptr, {});
  copy_gpu_to_row_contiguous(a, d, s, op);
  return d;
}

// quant::dispatch_float with the device type of the element type.
template <typename F>
void dispatch_float(Dtype t, const char* op, F&& f) {
  quant::dispatch_float(t, op, [&](auto tag) {
    f(tessera::TypeTag<device_t<typename decltype(tag)::type>>{});
  });
}

// f(T{}) for the device type T of t, bfloat16, float16 or float32: the x
// types of the matrix-vector and small-M kernels.
template <typename F>
void dispatch_gemv_x(Dtype t, F&& f) {
  if (t == bfloat16) {
    f(__nv_bfloat16{});
  } else if (t == float16) {
    f(__half{});
  } else {
    f(float{});
  }
}

template <typename T>
__global__ void quantize_kernel(const T* __restrict__ w, uint32_t* __restrict__ packed,
                                T* __restrict__ scales, T* __restrict__ biases, int64_t groups,
                                int group_size, int bits) {
  using C = dev_compute_t<T>;
  for (int64_t gi = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; gi < groups;
       gi += int64_t(gridDim.x) * blockDim.x) {
    const T* x = w + gi * group_size;
    C lo = widen(x[0]), hi = lo;
    for (int i = 1; i < group_size; ++i) {
      C v = widen(x[i]);
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
    C sc, zc;
    quant::affine_params(lo, hi, bits, sc, zc);
    scales[gi] = convert<T>(sc);
    biases[gi] = convert<T>(zc);
    uint32_t* dst = packed + gi * group_size * bits / 32;
    uint32_t q[32];
    for (int c = 0; c < group_size / 32; ++c) {
#pragma unroll
      for (int i = 0; i < 32; ++i) q[i] = quant::affine_q(widen(x[c * 32 + i]), sc, zc, bits);
      quant::pack32(q, bits, dst + c * bits);
    }
  }
}

// y (M, N) = x (M, K) @ W^T for a few rows of float32 or float64 x (M <=
// kSmallM), W (N, K) packed, per batch element blockIdx.y: one warp per output
// column n. Each
// lane takes chunks of 32 values (B words), unpacks them and adds
// scale * (q . x) + bias * sum(x) for every row of x; the warp then sums.
constexpr int kSmallM = 8;

// M is the rows' bound (1, 2, 4 or 8), rows <= M the actual count.
template <typename T, int B, int M>
__global__ void small_m_kernel(const T* __restrict__ x, const uint32_t* __restrict__ w,
                               const T* __restrict__ scales, const T* __restrict__ biases,
                               T* __restrict__ y, int rows, int64_t N, int64_t K,
                               int group_size) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const int64_t batch = blockIdx.y;
  const int64_t n = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (n >= N) return;
  const int64_t words = K * B / 32, groups = K / group_size, chunks = K / 32;
  const uint32_t* row = w + (batch * N + n) * words;
  const T* sc = scales + (batch * N + n) * groups;
  const T* bi = biases + (batch * N + n) * groups;
  const T* xb = x + batch * rows * K;
  C acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = C(0);
  uint32_t q[32];
  for (int64_t c = lane; c < chunks; c += 32) {
    quant::unpack32<B>(row + c * B, q);
    const int64_t g = qmm::group_of(c * 32, group_size);
    const C s = convert<C>(sc[g]), z = convert<C>(bi[g]);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      if (m >= rows) break;
      const T* xm = xb + m * K + c * 32;
      C dot = C(0), sum = C(0);
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        const C v = convert<C>(xm[i]);
        dot += static_cast<C>(q[i]) * v;
        sum += v;
      }
      acc[m] += s * dot + z * sum;
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    C v = acc[m];
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
    if (lane == 0 && m < rows) y[(batch * rows + m) * N + n] = convert<T>(v);
  }
}

template <typename T, int B>
void launch_small_m(int rows, const void* x, const void* w, const void* scales,
                    const void* biases, void* y, int64_t batches, int64_t N, int64_t K,
                    int group_size, cudaStream_t st) {
  constexpr int kWarps = 8;
  dim3 grid(static_cast<unsigned>((N + kWarps - 1) / kWarps), static_cast<unsigned>(batches));
  auto args = [&](auto kernel) {
    kernel<<<grid, kWarps * 32, 0, st>>>(
        static_cast<const T*>(x), static_cast<const uint32_t*>(w), static_cast<const T*>(scales),
        static_cast<const T*>(biases), static_cast<T*>(y), rows, N, K, group_size);
  };
  if (rows <= 1) {
    args(small_m_kernel<T, B, 1>);
  } else if (rows <= 2) {
    args(small_m_kernel<T, B, 2>);
  } else if (rows <= 4) {
    args(small_m_kernel<T, B, 4>);
  } else {
    args(small_m_kernel<T, B, 8>);
  }
}

// out (allocated by the caller, dense) = dequantize(w, scales, biases).
void dequantize_into(const array& w_in, const array& scales_in, const array& biases_in,
                     array& out, int group_size, int bits, const Stream& s, const char* op) {
  array w = dense(w_in, s, op), scales = dense(scales_in, s, op), biases = dense(biases_in, s, op);
  const int64_t n = static_cast<int64_t>(out.size());
  const uint32_t* wp = device_ptr<uint32_t>(w, s);
  const void* sp = device_ptr(scales, s);
  const void* bp = device_ptr(biases, s);
  void* op_out = allocate_output(out, s);
  dispatch_float(out.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    check(qmm::dequantize<T>(wp, static_cast<const T*>(sp), static_cast<const T*>(bp),
                             static_cast<T*>(op_out), n, group_size, bits, cuda_stream(s)),
          "qmm::dequantize", __FILE__, __LINE__);
  });
  check_launch(op);
}

}  // namespace

void Quantize::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const Stream& s = stream();
  array w = dense(inputs[0], s, "Quantize");
  void* packed = allocate_output(outputs[0], s);
  void* scales = allocate_output(outputs[1], s);
  void* biases = allocate_output(outputs[2], s);
  if (w.size() == 0) return;
  const int64_t groups = static_cast<int64_t>(w.size()) / group_size_;
  const void* x = device_ptr(w, s);
  dispatch_float(w.dtype(), "Quantize", [&](auto tag) {
    using T = typename decltype(tag)::type;
    quantize_kernel<T><<<grid_blocks(groups, kThreads), kThreads, 0, cuda_stream(s)>>>(
        static_cast<const T*>(x), static_cast<uint32_t*>(packed), static_cast<T*>(scales),
        static_cast<T*>(biases), groups, group_size_, bits_);
  });
  check_launch("Quantize");
}

void Dequantize::eval_gpu(const std::vector<array>& inputs, array& out) {
  if (out.size() == 0) {
    allocate_output(out, stream());
    return;
  }
  dequantize_into(inputs[0], inputs[1], inputs[2], out, group_size_, bits_, stream(),
                  "Dequantize");
}

void QuantizedMatmul::eval_gpu(const std::vector<array>& inputs, array& out) {
  const Stream& s = stream();
  const array& w = inputs[1];
  if (out.size() == 0) {
    allocate_output(out, s);
    return;
  }
  const int64_t w_rows = w.shape(-2), values = w.shape(-1) * 32 / bits_;
  const int64_t batches = static_cast<int64_t>(w.size()) / (w_rows * w.shape(-1));
  const int64_t rows_per_batch =
      static_cast<int64_t>(inputs[0].size()) / (transpose_ ? values : w_rows) / batches;
  const Dtype t = out.dtype();
  const bool half = t == float16 || t == bfloat16;
  const cudaDeviceProp& prop = properties(s.device.index);
  // Few rows of x, one pass over the packed weights: Note [Quantized GEMV] for
  // one row of half x or up to four of float32 x, else Note [Small-M quantized
  // product] on the tensor cores for up to kMaxRows of half x.
  const bool gemv =
      transpose_ && t != float64 && rows_per_batch <= (half ? 1 : qmm::kGemvMaxRows);
  if (gemv || (transpose_ && half && prop.major >= 8 && rows_per_batch <= qmm::kMaxRows)) {
    const char* op = "QuantizedMatmul";
    array x = dense(inputs[0], s, op), wd = dense(w, s, op);
    const void* xp = device_ptr(x, s);
    const uint32_t* wp = device_ptr<uint32_t>(wd, s);
    if (qmm::small_m_applies(bits_, rows_per_batch, w_rows, values, batches, xp, wp)) {
      const int M = static_cast<int>(rows_per_batch);
      array scales = dense(inputs[2], s, op), biases = dense(inputs[3], s, op);
      const void* sp = device_ptr(scales, s);
      const void* bp = device_ptr(biases, s);
      void* yp = allocate_output(out, s);
      auto run = [&](auto tag) {
        using T = decltype(tag);
        const T* xt = static_cast<const T*>(xp);
        const T* st = static_cast<const T*>(sp);
        const T* bt = static_cast<const T*>(bp);
        if (gemv) {
          check(qmm::gemv<T>(xt, wp, st, bt, static_cast<T*>(yp), M, w_rows, values, group_size_,
                             bits_, batches, cuda_stream(s)),
                "qmm::gemv", __FILE__, __LINE__);
          return;
        }
        if constexpr (!std::is_same_v<T, float>) {
          qmm::SmallM plan =
              qmm::small_m_plan<T>(bits_, M, w_rows, values, batches, prop.multiProcessorCount);
          const int64_t partial_floats = qmm::small_m_partials(plan, M, w_rows, batches);
          float* partials = nullptr;
          if (partial_floats) {
            partials = static_cast<float*>(scratch(partial_floats * sizeof(float), s));
            plan.counters = zeroed_counters(s, (w_rows + qmm::kCols - 1) / qmm::kCols * batches);
          }
          check(qmm::small_m<T>(xt, wp, st, bt, static_cast<T*>(yp), partials, M, w_rows, values,
                                group_size_, bits_, batches, plan, cuda_stream(s)),
                "qmm::small_m", __FILE__, __LINE__);
        }
      };
      dispatch_gemv_x(t, run);
      return;
    }
  }
  if (transpose_ && !half && rows_per_batch <= kSmallM && batches <= 65535) {
    // Few rows of x: one pass over the packed weights, no dequantized copy.
    const char* op = "QuantizedMatmul";
    array x = dense(inputs[0], s, op), wd = dense(w, s, op);
    array scales = dense(inputs[2], s, op), biases = dense(inputs[3], s, op);
    const void* xp = device_ptr(x, s);
    const void* wp = device_ptr(wd, s);
    const void* sp = device_ptr(scales, s);
    const void* bp = device_ptr(biases, s);
    void* yp = allocate_output(out, s);
    auto run = [&](auto tag) {
      using T = decltype(tag);
      quant::dispatch_bits(bits_, [&](auto b) {
        launch_small_m<T, decltype(b)::value>(static_cast<int>(rows_per_batch), xp, wp, sp, bp,
                                              yp, batches, w_rows, values, group_size_,
                                              cuda_stream(s));
      });
    };
    if (t == float32) {
      run(float{});
    } else {
      run(double{});
    }
    check_launch(op);
    return;
  }
  // W in the output's dtype, with w's shape but for the unpacked last axis.
  Shape w_shape = w.shape();
  w_shape.back() = static_cast<int>(values);
  array W(w_shape, out.dtype(), nullptr, {});
  dequantize_into(w, inputs[2], inputs[3], W, group_size_, bits_, s, "QuantizedMatmul");

  const int nd = static_cast<int>(W.ndim());
  const int64_t K = transpose_ ? values : w_rows, N = transpose_ ? w_rows : values;
  // The right operand (..., K, N): W itself, or W transposed as a view.
  Shape b_shape = w_shape;
  Strides b_strides = W.strides();
  if (transpose_) {
    std::swap(b_shape[nd - 1], b_shape[nd - 2]);
    std::swap(b_strides[nd - 1], b_strides[nd - 2]);
  }
  array b = views::view_of(W, b_shape, b_strides, 0);
  // The left operand (..., M, K): x's rows as a matrix when w has no batch axes.
  array x = dense(inputs[0], s, "QuantizedMatmul");
  Shape a_shape = x.shape(), o_shape = out.shape();
  if (nd == 2) {
    const int rows = static_cast<int>(x.size() / K);
    a_shape = {rows, static_cast<int>(K)};
    o_shape = {rows, static_cast<int>(N)};
  }
  array a = views::view_of(x, a_shape, row_major_strides(a_shape), 0);
  array product(o_shape, out.dtype(), nullptr, {});
  Matmul(s).eval_gpu({a, b}, product);
  Strides strides = row_major_strides(out.shape());
  out.move_shared_buffer(product, strides, compute_flags(out.shape(), strides), out.size());
}

bool gpu::grouped_quantized_matmul(const GroupedProducts& g, const std::vector<array>& inputs,
                                   std::vector<array>& outputs) {
  const auto& first = dynamic_cast<const QuantizedMatmul&>(g.member(0));
  const auto [group_size, bits, transpose] = first.parameters();
  const Stream& s = g.stream();
  const array& x = inputs[0];
  const Dtype t = outputs[0].dtype();
  const bool half = t == float16 || t == bfloat16;
  if (!transpose || t == float64 || x.dtype() != t || !x.flags().row_contiguous ||
      g.size() > size_t(qmm::GemvWeights<float>::kMax)) {
    return false;
  }
  const int64_t K = x.shape(-1), M = static_cast<int64_t>(x.size()) / std::max<int64_t>(K, 1);
  if (M < 1 || M > (half ? 1 : qmm::kGemvMaxRows)) return false;
  const void* xp = device_ptr(x, s);
  std::vector<std::vector<array>> members;
  for (size_t i = 0; i < g.size(); ++i) {
    members.push_back(g.member_inputs(i, inputs));
    const auto& in = members.back();
    if (in.size() != 4 || outputs[i].size() == 0 || outputs[i].dtype() != t) return false;
    const array& w = in[1];
    if (w.ndim() != 2 || w.shape(-1) * 32 / bits != K) return false;
    for (size_t j = 1; j < 4; ++j) {
      if (!in[j].flags().row_contiguous || (j > 1 && in[j].dtype() != t)) return false;
    }
  }
  std::vector<const void*> words;
  for (auto& in : members) {
    words.push_back(device_ptr(in[1], s));
    if (!qmm::small_m_applies(bits, M, in[1].shape(0), K, 1, xp, words.back())) return false;
  }
  auto run = [&](auto tag) {
    using T = decltype(tag);
    qmm::GemvWeights<T> ws{};
    ws.count = static_cast<int>(members.size());
    for (size_t i = 0; i < members.size(); ++i) {
      ws.w[i] = static_cast<const uint32_t*>(words[i]);
      ws.s[i] = static_cast<const T*>(device_ptr(members[i][2], s));
      ws.b[i] = static_cast<const T*>(device_ptr(members[i][3], s));
      ws.y[i] = static_cast<T*>(allocate_output(outputs[i], s));
      ws.n[i] = members[i][1].shape(0);
    }
    check(qmm::gemv<T>(static_cast<const T*>(xp), ws, static_cast<int>(M), K, group_size, bits,
                       1, cuda_stream(s)),
          "qmm::gemv", __FILE__, __LINE__);
  };
  dispatch_gemv_x(t, run);
  return true;
}

}  // namespace tessera
