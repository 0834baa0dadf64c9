// Note [Tiny ops]
// Launching a kernel costs the host about 3.7 us on an H200 machine, far more
// than an elementwise op on a few elements takes to run. Such ops (binary
// arithmetic on dense operands of at most kTinyMax elements) are therefore not
// launched one by one: each is appended to its stream's pending batch, and one
// kernel, a single block (a grid for a batch of one op), runs a whole batch in
// order (a chain of 10,000 dependent adds: 0.05 us per op to queue and 0.19 us
// per op on the GPU, against 3.7 us per op launched one by one).
//
// The batch is launched before anything else is queued on its stream: every
// path that queues work or waits on a stream (kernel launches, copies,
// events, stream-ordered frees, synchronisation) obtains the stream through
// the backend, which launches the pending batch first. So the work of a
// stream stays in program order. eval() also launches what is pending when it
// has run its tasks, so that the GPU does not wait for the next call.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tessera::gpu {

inline constexpr int64_t kTinyMax = 4096;

enum class TinyCode : uint8_t { add, subtract, multiply, divide, maximum, minimum };
enum class TinyType : uint8_t { f32, f16, bf16, f64, i32, u32, i64, u64 };

// How an operand of a tiny op is read: elements at its address, one element
// at its address (broadcast), or one element carried in the op itself (a
// host-known scalar: Note [Scalar operands on the GPU] in binary.cu).
enum class TinyMode : uint8_t { vector, scalar, value };

// An operand's address, or in mode `value` its element's bytes (in the low
// bytes, the rest zero).
union TinyOperand {
  const void* ptr;
  uint64_t bits;
};

// out[i] = op(a[i], b[i]) for i < n, each operand read as its mode says,
// elements of device type `type`.
struct TinyOp {
  TinyOperand a;
  TinyOperand b;
  void* out;
  int32_t n;
  TinyCode code;
  TinyType type;
  TinyMode a_mode;
  TinyMode b_mode;
};
static_assert(sizeof(TinyOp) == 32);

// A kernel parameter block of at most 4 KiB (the limit of every CUDA version).
inline constexpr int kTinyBatch = 127;
struct TinyBatch {
  int32_t count = 0;
  TinyOp ops[kTinyBatch];
};
static_assert(sizeof(TinyBatch) <= 4096);

// Queues the ops of a batch on stream st, to run in order (tiny.cu). Never
// throws: it is called on paths that must not (frees, destructors).
void launch_tiny(const TinyBatch& batch, cudaStream_t st);

}  // namespace tessera::gpu
