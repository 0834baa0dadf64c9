// eval_gpu of CustomKernel: compile the generated source (or load the user's
// PTX / cubin) through jit.h, then launch it on the node's stream with the
// parameters that Note [Custom kernels] (ops/custom_kernel.h) lists.
#include <algorithm>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "tessera/backend/cuda/copy.h"
#include "tessera/backend/cuda/device.h"
#include "tessera/backend/cuda/jit.h"
#include "tessera/ops/primitives/custom_kernel.h"

namespace tessera::fast {

namespace {

// The values a kernel takes by value, each in storage that stays put while
// the launch reads it (cuLaunchKernel takes a pointer per parameter).
class KernelParameters {
 public:
  void add_pointer(const void* p) { add(&p, sizeof p); }
  void add(const void* value, size_t bytes) {
    Slot& slot = slots_.emplace_back();
    std::memcpy(slot.bytes, value, bytes);
    pointers_.push_back(slot.bytes);
  }
  // A Shape or Strides argument: MAX_NDIM elements of T, zeros past ndim.
  template <typename T, typename V>
  void add_dims(const std::vector<V>& values) {
    T dims[kCustomKernelMaxNdim] = {};
    std::copy(values.begin(), values.end(), dims);
    add(dims, sizeof dims);
  }
  void** pointers() { return pointers_.data(); }

 private:
  struct alignas(8) Slot {
    unsigned char bytes[kCustomKernelMaxNdim * sizeof(int64_t)];
  };
  std::deque<Slot> slots_;  // a deque: adding does not move the earlier slots
  std::vector<void*> pointers_;
};

// Every element of out (row-contiguous at dst) set to value, cast to out's
// dtype: a copy of one element broadcast (a 0-d output as one of shape (1)).
void fill(const array& out, void* dst, float value, const Stream& s) {
  array scalar(value);
  const bool scalar_out = out.ndim() == 0;
  gpu::copy_gpu(scalar_out ? Shape{1} : out.shape(), gpu::device_ptr(scalar, s), float32,
                Strides(std::max<size_t>(out.ndim(), 1), 0), dst, out.dtype(),
                scalar_out ? Strides{1} : out.strides(), s, "CustomKernel");
}

}  // namespace

void CustomKernel::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const Stream& s = stream();
  std::vector<void*> output_ptrs;
  for (auto& out : outputs) {
    output_ptrs.push_back(gpu::allocate_output(out, s));
    if (init_value_ && out.size() > 0) fill(out, output_ptrs.back(), *init_value_, s);
  }
  const auto [gx, gy, gz] = grid_;
  const auto [tx, ty, tz] = threadgroup_;
  if (gx == 0 || gy == 0 || gz == 0) return;  // no thread to run

  void* f = nullptr;
  try {
    f = precompiled_ ? gpu::jit::load(source_, name_.c_str(), s.device.index)
                     : gpu::jit::kernel(source_, name_.c_str(), s.device.index,
                                        gpu::jit::Headers::toolkit);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("[") + op() + "] the kernel '" + name_ +
                             "' could not be built: " + e.what());
  }

  KernelParameters params;
  std::vector<array> dense;  // row-contiguous copies, alive until the launch is queued
  for (size_t i = 0; i < inputs.size(); ++i) {
    const array* in = &inputs[i];
    if (ensure_row_contiguous_ && !in->flags().row_contiguous) {
      dense.emplace_back(in->shape(), in->dtype(), nullptr, std::vector<array>{});
      gpu::copy_gpu_to_row_contiguous(*in, dense.back(), s, "CustomKernel");
      in = &dense.back();
    }
    params.add_pointer(in->size() > 0 ? gpu::device_ptr(*in, s) : nullptr);
    if (shape_uses_[i].shape) params.add_dims<int32_t>(in->shape());
    if (shape_uses_[i].strides) params.add_dims<int64_t>(in->strides());
    if (shape_uses_[i].ndim) {
      const int ndim = static_cast<int>(in->ndim());
      params.add(&ndim, sizeof ndim);
    }
  }
  for (void* p : output_ptrs) params.add_pointer(p);
  for (const ScalarArg& scalar : scalars_) {
    std::visit([&](auto v) { params.add(&v, sizeof v); }, scalar);  // bool, int32 or float32
  }

  // The grid counts threads: blocks of the threadgroup (cut to the grid) cover it.
  auto blocks = [](int g, int t) { return static_cast<unsigned>((int64_t{g} + t - 1) / t); };
  gpu::jit::Dim3 grid{blocks(gx, tx), blocks(gy, ty), blocks(gz, tz)};
  gpu::jit::Dim3 block{static_cast<unsigned>(std::min(tx, gx)),
                       static_cast<unsigned>(std::min(ty, gy)),
                       static_cast<unsigned>(std::min(tz, gz))};
  try {
    gpu::jit::launch(f, grid, block, static_cast<unsigned>(shared_memory_), params.pointers(),
                     gpu::cuda_stream(s));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("[") + op() + "] the kernel '" + name_ +
                             "' could not be launched: " + e.what());
  }
}

}  // namespace tessera::fast
