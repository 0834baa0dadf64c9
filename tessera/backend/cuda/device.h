// What CUDA kernels need from the backend: streams, errors, and the residency
// protocol's view of buffers. Included by backend/cuda sources only.
//
//   void Exp::eval_gpu(const std::vector<array>& inputs, array& out) {
//     auto& s = stream();
//     const float* x = gpu::device_ptr<float>(inputs[0], s);   // uploads if needed
//     float* y = gpu::allocate_output<float>(out, s);           // device buffer
//     exp_kernel<<<blocks, threads, 0, gpu::cuda_stream(s)>>>(x, y, n);
//     gpu::check_launch("Exp");
//   }
//
// Note [Residency]
// A Buffer (memory/allocator.h) may hold a host copy and a device copy, each
// valid or not. device_ptr() makes the device copy valid (copying the host copy
// up on the copy stream, which the compute stream then waits for) and leaves
// the host copy valid: a read keeps both. allocate_output() gives an output a
// device copy only; a kernel writing it makes it the only valid copy. A host
// read (array::data, a CPU kernel) copies it back after the producing stream's
// work (see gpu::ensure_host).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "tessera/core/array.h"
#include "tessera/backend/cuda/tiny.h"
#include "tessera/core/device.h"

namespace tessera::gpu {

// Throws std::runtime_error naming the call, the op context and the CUDA error.
void check(cudaError_t err, const char* call, const char* file, int line);
#define TESSERA_CUDA_CHECK(call) ::tessera::gpu::check((call), #call, __FILE__, __LINE__)
// After a kernel launch: throws "[op] kernel launch failed: <CUDA error>".
void check_launch(const char* op);

// The cudaStream_t behind a Tessera GPU stream.
cudaStream_t cuda_stream(const Stream& s);
const cudaDeviceProp& properties(int device = 0);

// Device address of a's first element (offset applied), readable by work
// queued on s from now on.
const void* device_ptr(const array& a, const Stream& s);
template <typename T>
const T* device_ptr(const array& a, const Stream& s) {
  return static_cast<const T*>(device_ptr(a, s));
}

// For an operand of one element (a.data_size() == 1) whose host copy is
// valid: copies that element to `value` (a.itemsize() bytes) and returns true,
// with no upload and no residency work, for a kernel that takes the operand
// by value (Note [Scalar operands on the GPU] in binary.cu). False when only
// the device copy is valid.
bool host_scalar(const array& a, void* value);

// Gives out a row-contiguous device buffer (like array::set_data) and returns
// its address. The data is written by work on s.
void* allocate_output(array& out, const Stream& s);
// The same with a layout of the caller's choice (e.g. the input's).
void* allocate_output(array& out, const Stream& s, size_t data_size, Strides strides, Flags flags);
template <typename T>
T* allocate_output(array& out, const Stream& s) {
  return static_cast<T*>(allocate_output(out, s));
}

// For an output that took over an input's buffer (array::move_shared_buffer):
// the device address to write, marking the host copy stale.
void* writable_device_ptr(array& out, const Stream& s);

// Appends a tiny op to s's pending batch (Note [Tiny ops] in tiny.h) instead
// of launching a kernel; its operands are device_ptr / allocate_output
// addresses obtained for s.
void enqueue_tiny(const Stream& s, const TinyOp& op);

// Scratch device memory freed after the work queued on s so far (e.g. for
// cuBLASLt workspaces and reduction partials).
void* scratch(size_t bytes, const Stream& s);

// n zeroed counters on the device for a kernel whose last block to finish
// does the final step of a split reduction (an atomicAdd per block picks it):
// one buffer per stream, whose kernels run one after another, each leaving
// its counters zero for the next. Null when n is more than the buffer holds
// (the caller then finishes in a second kernel).
unsigned* zeroed_counters(const Stream& s, int64_t n);

}  // namespace tessera::gpu
