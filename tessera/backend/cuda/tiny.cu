// The kernel that runs a batch of tiny elementwise ops (Note [Tiny ops] in
// tiny.h): one block, the ops one after another, each over all threads (a
// batch of one op: a grid of blocks).
#include <algorithm>

#include "tessera/backend/cuda/elementwise.cuh"
#include "tessera/backend/cuda/tiny.h"

namespace tessera::gpu {

namespace {

constexpr int kTinyThreads = 256;

// Element i of an operand read as its mode says; `value` is the element a
// TinyMode::value operand carries.
template <typename T>
__device__ __forceinline__ T element(const TinyOperand& x, TinyMode mode, const T& value, int i) {
  if (mode == TinyMode::value) return value;
  return static_cast<const T*>(x.ptr)[mode == TinyMode::scalar ? 0 : i];
}

template <typename T>
__device__ __forceinline__ T carried(const TinyOperand& x, TinyMode mode) {
  T v{};
  if (mode == TinyMode::value) memcpy(&v, &x.bits, sizeof(T));
  return v;
}

template <typename T, typename Op>
__device__ __forceinline__ void run(const TinyOp& op, const Op& f) {
  const T va = carried<T>(op.a, op.a_mode), vb = carried<T>(op.b, op.b_mode);
  T* out = static_cast<T*>(op.out);
  for (int i = blockIdx.x * kTinyThreads + threadIdx.x; i < op.n; i += gridDim.x * kTinyThreads) {
    out[i] = apply<T>(f, element(op.a, op.a_mode, va, i), element(op.b, op.b_mode, vb, i));
  }
}

template <typename T>
__device__ __forceinline__ void run_typed(const TinyOp& op) {
  switch (op.code) {
    case TinyCode::add: return run<T>(op, scalar::Add{});
    case TinyCode::subtract: return run<T>(op, scalar::Subtract{});
    case TinyCode::multiply: return run<T>(op, scalar::Multiply{});
    case TinyCode::divide:
      // Divide is queued for floats only (integers are divided as floats).
      if constexpr (!std::is_integral_v<T>) run<T>(op, scalar::Divide{});
      return;
    case TinyCode::maximum: return run<T>(op, scalar::Maximum{});
    case TinyCode::minimum: return run<T>(op, scalar::Minimum{});
  }
}

// The ops of a batch, in a kernel parameter block sized for up to C of them:
// a launch copies its whole parameter block, so a batch of one op (the
// residual add between two kernels of a decoding step) goes in 40 bytes, not
// in the 4 KiB that a full batch needs. A batch of one op runs over a block
// per kTinyThreads elements (nothing after it in the batch waits for it):
// one block walking 2048 elements, each thread load after load, took 3.5 us
// on an H100, where MLX's kernel for the same add takes 1.2.
template <int C>
struct TinyOps {
  int32_t count;
  TinyOp ops[C];
};

template <int C>
__global__ void __launch_bounds__(kTinyThreads) tiny_kernel(const TinyOps<C> batch) {
  for (int k = 0; k < batch.count; ++k) {
    const TinyOp& op = batch.ops[k];
    switch (op.type) {
      case TinyType::f32: run_typed<float>(op); break;
      case TinyType::f16: run_typed<__half>(op); break;
      case TinyType::bf16: run_typed<__nv_bfloat16>(op); break;
      case TinyType::f64: run_typed<double>(op); break;
      case TinyType::i32: run_typed<int32_t>(op); break;
      case TinyType::u32: run_typed<uint32_t>(op); break;
      case TinyType::i64: run_typed<int64_t>(op); break;
      case TinyType::u64: run_typed<uint64_t>(op); break;
    }
    // The next op may read what this one wrote (a barrier orders the
    // block's global memory accesses).
    __syncthreads();
  }
}

template <int C>
void launch_ops(const TinyBatch& batch, cudaStream_t st) {
  TinyOps<C> ops;
  ops.count = batch.count;
  for (int k = 0; k < batch.count; ++k) ops.ops[k] = batch.ops[k];
  const unsigned blocks =
      C == 1 ? static_cast<unsigned>(std::max<int32_t>(1, (ops.ops[0].n + kTinyThreads - 1) /
                                                              kTinyThreads))
             : 1u;
  tiny_kernel<C><<<blocks, kTinyThreads, 0, st>>>(ops);
}

}  // namespace

void launch_tiny(const TinyBatch& batch, cudaStream_t st) {
  static_assert(sizeof(TinyOps<kTinyBatch>) <= 4096);
  // No check here: this runs where errors must not be thrown (frees, event
  // records); a failed launch stays for the next checked CUDA call to report.
  if (batch.count <= 1) {
    launch_ops<1>(batch, st);
  } else if (batch.count <= 8) {
    launch_ops<8>(batch, st);
  } else {
    launch_ops<kTinyBatch>(batch, st);
  }
}

}  // namespace tessera::gpu
