// eval_gpu of Compiled: one generated kernel per program and input layout
// (fused_source.h), compiled by NVRTC (jit.h). A kernel that does not compile
// is reported once and the program runs as its unfused primitives' kernels.
#include <algorithm>
#include <cstring>
#include <iostream>
#include <stdexcept>

#include "tessera/backend/common/fused_layout.h"
#include "tessera/backend/cuda/device.h"
#include "tessera/backend/cuda/fused_source.h"
#include "tessera/backend/cuda/jit.h"
#include "tessera/ops/primitives/compiled.h"

namespace tessera {

namespace {

// The program's steps, each by the kernel of the primitive it replaces.
void run_unfused(const Compiled& c, const std::vector<array>& inputs, std::vector<array>& outputs) {
  const FusedProgram& p = c.program();
  std::vector<array> regs(inputs.begin(), inputs.end());
  for (const FusedStep& step : p.steps) {
    std::vector<array> args;
    for (uint32_t r : step.args) args.push_back(regs[r]);
    std::vector<array> outs{array(p.shape, step.dtype, nullptr, {})};
    step.primitive->eval_gpu(args, outs);
    regs.push_back(outs[0]);
  }
  const std::vector<uint32_t> registers = p.output_registers();
  for (size_t k = 0; k < outputs.size(); ++k) outputs[k].copy_shared_buffer(regs[registers[k]]);
}

}  // namespace

void Compiled::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const Stream& s = stream();
  if (outputs[0].size() == 0) {
    for (auto& out : outputs) gpu::allocate_output(out, s);
    return;
  }
  const FusedLayout layout = fused_layout(outputs[0].shape(), inputs);
  std::string key(1, static_cast<char>('0' + layout.shape.size()));
  for (auto a : layout.access) key += static_cast<char>('a' + static_cast<int>(a));
  void* f = nullptr;
  {
    std::lock_guard lock(kernels_mutex_);
    auto it = kernels_.find(key);
    if (it == kernels_.end()) {
      std::vector<Dtype> dtypes;
      for (const auto& in : inputs) dtypes.push_back(in.dtype());
      try {
        f = gpu::jit::kernel(gpu::fused_source(program_, dtypes, layout), gpu::kFusedKernelName,
                             s.device.index);
      } catch (const std::runtime_error& e) {
        std::cerr << "[compile] a fused kernel could not be built; its ops run one by one: "
                  << e.what() << std::endl;
      }
      it = kernels_.emplace(key, f).first;
    }
    f = it->second;
  }
  if (!f) {
    run_unfused(*this, inputs, outputs);
    return;
  }

  std::vector<const void*> pointers;
  for (const auto& in : inputs) pointers.push_back(gpu::device_ptr(in, s));
  std::vector<void*> dst;
  for (auto& out : outputs) dst.push_back(gpu::allocate_output(out, s));
  long long n = layout.size;
  // The Dims struct of the strided inputs (fused_source.h).
  const size_t nd = layout.shape.size();
  const size_t shape_bytes = (nd * sizeof(int) + 7) / 8 * 8;
  std::vector<uint64_t> dims((shape_bytes + 8 * nd * inputs.size()) / 8 + 1, 0);
  char* d = reinterpret_cast<char*>(dims.data());
  for (size_t k = 0; k < nd; ++k) {
    int e = layout.shape[k];
    std::memcpy(d + k * sizeof(int), &e, sizeof(int));
  }
  size_t strided = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (layout.access[i] != FusedAccess::strided) continue;
    std::memcpy(d + shape_bytes + 8 * nd * strided++, layout.strides[i].data(), 8 * nd);
  }
  std::vector<void*> args;
  for (auto& p : pointers) args.push_back(&p);
  for (auto& p : dst) args.push_back(&p);
  args.push_back(&n);
  if (strided > 0) args.push_back(dims.data());
  const long long tile = gpu::kFusedBlock * gpu::kFusedPerThread;
  const long long blocks = std::min<long long>((n + tile - 1) / tile, 1ll << 30);
  gpu::jit::launch(f, static_cast<unsigned>(blocks), gpu::kFusedBlock, args.data(),
                   gpu::cuda_stream(s));
}

}  // namespace tessera
