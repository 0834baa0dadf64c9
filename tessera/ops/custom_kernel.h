// Kernels written by the user in CUDA C++, run on the GPU as one node of the
// graph (after MLX's mlx/fast.h).
//
//   auto kernel = fast::cuda_kernel("myexp", {"inp"}, {"out"}, R"(
//       auto i = cooperative_groups::this_grid().thread_rank();
//       if (i < n) out[i] = exp(T(inp[i]));)");
//   auto y = kernel({x}, {x.shape()}, {x.dtype()}, {int(x.size()), 1, 1}, {256, 1, 1},
//                   {{"T", float32}, {"n", int(x.size())}}, std::nullopt, false, {})[0];
//
// Note [Custom kernels]
// cuda_kernel turns the body of a kernel into a whole source
// (custom_kernel_source in ops/custom_kernel.cpp): the toolkit's cooperative
// groups, half and bfloat16 headers and `inf`, the user's header, then in
// namespace tessera::cu an extern "C" __global__ function named
// custom_kernel_<name>_<template arguments> whose parameters are, per input,
// `const <type>* <name>`, then `<name>_shape` (Shape: MAX_NDIM int32),
// `<name>_strides` (Strides: MAX_NDIM int64, in elements) and `<name>_ndim`
// (int) where the body mentions them, then per output `<type>* <name>`. The template arguments open the body as
// `constexpr int N = 4;`, `constexpr bool B = true;` or `using T = float;`.
// NVRTC compiles each distinct source once per device (jit.h's cache, keyed
// by the whole source).
// The grid counts threads, as Metal's does: the kernel runs on ceil(grid /
// threadgroup) blocks of min(threadgroup, grid) threads per axis, with
// `shared_memory` bytes of dynamic shared memory (`extern __shared__`).
// Outputs are row-contiguous and hold garbage unless init_value fills them.
// With ensure_row_contiguous, inputs arrive row-contiguous (copied if they
// are not); without it they arrive as they are, and the kernel indexes them
// through <name>_strides.
// The kernels run on the GPU only and have no derivatives or vmap rule.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera::fast {

// The value of a template argument: `constexpr int`, `constexpr bool` or a type.
using TemplateArg = std::variant<int, bool, Dtype>;
// A scalar passed by value to a precompiled kernel after its outputs.
using ScalarArg = std::variant<bool, int, float>;

// kernel(inputs, output_shapes, output_dtypes, grid, threadgroup,
//        template_args, init_value, verbose, stream) -> outputs.
// verbose prints the generated source.
using CustomKernelFunction = std::function<std::vector<array>(
    const std::vector<array>&, const std::vector<Shape>&, const std::vector<Dtype>&,
    std::tuple<int, int, int>, std::tuple<int, int, int>,
    std::vector<std::pair<std::string, TemplateArg>>, std::optional<float>, bool,
    StreamOrDevice)>;

// A kernel from the body `source` of a CUDA function over inputs and outputs
// of the given names (Note [Custom kernels]).
CustomKernelFunction cuda_kernel(const std::string& name,
                                 const std::vector<std::string>& input_names,
                                 const std::vector<std::string>& output_names,
                                 const std::string& source, const std::string& header = "",
                                 bool ensure_row_contiguous = true, int shared_memory = 0);

// Runs the extern "C" kernel `name` of compiled_source (PTX text or a cubin)
// on inputs (device pointers), then output pointers, then scalars by value
// (bool, int32, float32).
std::vector<array> precompiled_cuda_kernel(
    const std::string& name, const std::string& compiled_source,
    const std::vector<array>& inputs, const std::vector<Shape>& output_shapes,
    const std::vector<Dtype>& output_dtypes, const std::vector<ScalarArg>& scalars,
    std::tuple<int, int, int> grid, std::tuple<int, int, int> threadgroup,
    int shared_memory = 0, std::optional<float> init_value = std::nullopt,
    bool ensure_row_contiguous = false, StreamOrDevice s = {});

// MLX's Metal counterpart of cuda_kernel. There is no Metal here: the kernel
// is made (programs that define one at import still load) and throws
// std::runtime_error, naming it, when called.
CustomKernelFunction metal_kernel(const std::string& name,
                                  const std::vector<std::string>& input_names,
                                  const std::vector<std::string>& output_names,
                                  const std::string& source, const std::string& header = "",
                                  bool ensure_row_contiguous = true, bool atomic_outputs = false);

}  // namespace tessera::fast
