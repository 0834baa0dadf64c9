// CustomKernel: a kernel written by the user (fast::cuda_kernel, from CUDA
// source) or compiled by the user (fast::precompiled_cuda_kernel, PTX or
// cubin), one node with any number of outputs (Note [Custom kernels] in
// ops/custom_kernel.h).
//
//   auto p = std::make_shared<CustomKernel>(s, "custom_kernel_myexp", source, false,
//                                           {n, 1, 1}, {256, 1, 1}, uses, true,
//                                           std::nullopt, {}, 0);
//   auto outputs = array::make_arrays({x.shape()}, {x.dtype()}, p, {x});
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tessera/core/primitive.h"
#include "tessera/ops/custom_kernel.h"

namespace tessera::fast {

// Which of <input>_shape, <input>_strides and <input>_ndim a kernel takes
// after an input's pointer.
struct ShapeUses {
  bool shape = false, strides = false, ndim = false;
};

// The most dimensions of an input whose shape or strides a kernel takes (the
// length of Shape and Strides in the generated source).
inline constexpr int kCustomKernelMaxNdim = 10;

// The transform rules are the base class's throw (naming CustomKernel), and
// no two nodes are equivalent: a kernel may be nondeterministic.
class CustomKernel : public Primitive {
 public:
  CustomKernel(Stream s, std::string name, std::string source, bool precompiled,
               std::tuple<int, int, int> grid, std::tuple<int, int, int> threadgroup,
               std::vector<ShapeUses> shape_uses, bool ensure_row_contiguous,
               std::optional<float> init_value, std::vector<ScalarArg> scalars,
               int shared_memory)
      : Primitive(s),
        name_(std::move(name)),
        source_(std::move(source)),
        precompiled_(precompiled),
        grid_(grid),
        threadgroup_(threadgroup),
        shape_uses_(std::move(shape_uses)),
        ensure_row_contiguous_(ensure_row_contiguous),
        init_value_(init_value),
        scalars_(std::move(scalars)),
        shared_memory_(shared_memory) {}

  // The ops refuse a CPU stream, so this runs only for a node made by hand.
  void eval_cpu(const std::vector<array>&, std::vector<array>&) override {
    throw std::invalid_argument(std::string("[") + op() + "] runs on the GPU only");
  }
  TESSERA_EVAL_GPU_MULTI
  TESSERA_PRIMITIVE_NAME(CustomKernel)

  // The public op that made this node, for messages.
  const char* op() const { return precompiled_ ? "precompiled_cuda_kernel" : "cuda_kernel"; }
  const std::string& kernel_name() const { return name_; }
  const std::string& source() const { return source_; }

 private:
  std::string name_;    // of the extern "C" kernel in source_
  std::string source_;  // CUDA source, or the PTX / cubin when precompiled_
  bool precompiled_;
  std::tuple<int, int, int> grid_;         // in threads
  std::tuple<int, int, int> threadgroup_;  // threads per block
  std::vector<ShapeUses> shape_uses_;      // one per input
  bool ensure_row_contiguous_;
  std::optional<float> init_value_;
  std::vector<ScalarArg> scalars_;
  int shared_memory_;  // bytes of dynamic shared memory
};

}  // namespace tessera::fast
