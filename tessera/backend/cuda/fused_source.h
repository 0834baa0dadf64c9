// CUDA C++ source of the kernel that runs a fused program (ops/primitives/
// compiled.h): it loads each input with its strides (fused_layout), applies the
// scalar functors of backend/common/elementwise.h in registers and stores the
// output. The functors are the unfused kernels' own: their text is compiled in
// at build time and given to NVRTC after a prelude (jit_prelude.h).
//
//   std::string src = gpu::fused_source(program, input_dtypes, layout);
//   auto f = gpu::jit::kernel(src, gpu::kFusedKernelName, device);
#pragma once

#include <string>
#include <vector>

#include "tessera/backend/common/fused_layout.h"
#include "tessera/ops/primitives/compiled.h"

namespace tessera::gpu {

inline constexpr const char* kFusedKernelName = "tessera_fused";
// Elements per thread and threads per block of the generated kernel.
inline constexpr int kFusedPerThread = 4;
inline constexpr int kFusedBlock = 256;

// The text of backend/common/elementwise.h (generated at build time).
extern const char* const kJitFunctors;

// Whether the GPU kernel can run dtype t (complex values are not fused there).
bool fusable_on_gpu(Dtype t);

// The prelude, the functors and the epilogue: what every kernel source starts with.
const std::string& jit_header();

// The kernel (to follow jit_header())
//   extern "C" __global__ void NAME(const T0* in0, ..., O0* out0, ..., long long n[, NAME_dims dims])
// with one out pointer per register of program.output_registers(),
// and where NAME_dims (only with strided inputs) is
//   struct { int shape[ND]; long long strides[S][ND]; }
// for the S strided inputs in order, over layout.shape (ND dimensions). It
// runs with kFusedBlock threads per block, kFusedPerThread elements each.
std::string fused_kernel(const FusedProgram& program, const std::vector<Dtype>& input_dtypes,
                         const FusedLayout& layout, const std::string& name);

// jit_header() and the kernel named kFusedKernelName.
std::string fused_source(const FusedProgram& program, const std::vector<Dtype>& input_dtypes,
                         const FusedLayout& layout);

}  // namespace tessera::gpu
