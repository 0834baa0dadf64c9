// eval_gpu of Quantize, Dequantize and QuantizedMatmul (Note [Affine
// quantization] in backend/common/quantize.h, shared with the CPU kernels).
//
//   quantize    one thread per group: its extremes, its scale and bias, then
//               its values packed 32 at a time (`bits` words per 32 values)
//   dequantize  one thread per output element
//   matmul      w dequantized into a temporary of the output's dtype, then
//               the Matmul primitive's cuBLASLt path on x and that matrix
//               (a transposed view of it when transpose is true)
// Inputs that are not row-contiguous are copied into dense buffers first.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "tessera/backend/common/quantize.h"
#include "tessera/backend/common/views.h"
#include "tessera/backend/cuda/copy.h"
#include "tessera/backend/cuda/device.h"
#include "tessera/backend/cuda/reduce.cuh"
#include "tessera/ops/primitives/linalg.h"
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

// Calls f(TypeTag<T>{}) for the device type T of a floating dtype.
template <typename F>
void dispatch_float(Dtype t, const char* op, F&& f) {
  dispatch_device(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      f(tag);
    } else {
      throw std::logic_error(std::string("[") + op + "] dtype " + dtype_name(t) +
                             " reached the kernel (bug)");
    }
  });
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
    const T s = convert<T>(quant::affine_scale(lo, hi, bits));
    const T z = convert<T>(lo);
    scales[gi] = s;
    biases[gi] = z;
    const C sc = widen(s), zc = widen(z);
    uint32_t* dst = packed + gi * group_size * bits / 32;
    uint32_t q[32];
    for (int c = 0; c < group_size / 32; ++c) {
#pragma unroll
      for (int i = 0; i < 32; ++i) q[i] = quant::affine_q(widen(x[c * 32 + i]), sc, zc, bits);
      quant::pack32(q, bits, dst + c * bits);
    }
  }
}

template <typename T>
__global__ void dequantize_kernel(const uint32_t* __restrict__ w, const T* __restrict__ scales,
                                  const T* __restrict__ biases, T* __restrict__ out, int64_t n,
                                  int64_t values, int group_size, int bits) {
  using C = dev_compute_t<T>;
  const int64_t words = values * bits / 32, groups = values / group_size;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / values, k = i - r * values;
    const int64_t gi = r * groups + k / group_size;
    const C q = static_cast<C>(quant::unpack(w + r * words, k, bits));
    out[i] = convert<T>(widen(scales[gi]) * q + widen(biases[gi]));
  }
}

// out (allocated by the caller, dense) = dequantize(w, scales, biases).
void dequantize_into(const array& w_in, const array& scales_in, const array& biases_in,
                     array& out, int group_size, int bits, const Stream& s, const char* op) {
  array w = dense(w_in, s, op), scales = dense(scales_in, s, op), biases = dense(biases_in, s, op);
  const int64_t n = static_cast<int64_t>(out.size()), values = out.shape(-1);
  const uint32_t* wp = device_ptr<uint32_t>(w, s);
  const void* sp = device_ptr(scales, s);
  const void* bp = device_ptr(biases, s);
  void* op_out = allocate_output(out, s);
  dispatch_float(out.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dequantize_kernel<T><<<grid_blocks(n, kThreads), kThreads, 0, cuda_stream(s)>>>(
        wp, static_cast<const T*>(sp), static_cast<const T*>(bp), static_cast<T*>(op_out), n,
        values, group_size, bits);
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
  // W in the output's dtype, with w's shape but for the unpacked last axis.
  Shape w_shape = w.shape();
  const int64_t w_rows = w.shape(-2), values = w.shape(-1) * 32 / bits_;
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

}  // namespace tessera
