// fast::cuda_kernel and fast::precompiled_cuda_kernel: validate, generate the
// kernel's source, create the CustomKernel node (Note [Custom kernels] in
// ops/custom_kernel.h). The source is generated here, in every build, so that
// verbose shows it on any machine.
#include "tessera/ops/custom_kernel.h"

#include <algorithm>
#include <cctype>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "tessera/ops/primitives/custom_kernel.h"
#include "tessera/ops/utils.h"

namespace tessera::fast {

namespace {

// What every generated source starts with (the toolkit's headers: jit.h's
// Headers::toolkit), as MLX's CUDA backend provides it.
constexpr const char* kDefaultHeader = R"(#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda/std/array>
#include <cuda/std/limits>

#define inf cuda::std::numeric_limits<float>::infinity()

namespace tessera::cu {
// The types of <input>_shape and <input>_strides.
constexpr int MAX_NDIM = 10;
using Shape = cuda::std::array<int32_t, MAX_NDIM>;
using Strides = cuda::std::array<int64_t, MAX_NDIM>;
}  // namespace tessera::cu

)";
static_assert(kCustomKernelMaxNdim == 10, "MAX_NDIM in kDefaultHeader");

// The CUDA type of an element of t.
const char* cuda_type(Dtype t) {
  if (const char* name = c_type_name(t)) return name;
  if (t == float16) return "__half";
  if (t == bfloat16) return "__nv_bfloat16";
  if (t == complex64) return "cuda::std::complex<float>";
  throw std::logic_error("[cuda_kernel] a dtype without a CUDA type (bug)");
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (unsigned char c : s) {
    if (!std::isalnum(c) && c != '_') return false;
  }
  return true;
}

void check_identifier(const char* op, const char* what, const std::string& s) {
  if (!is_identifier(s)) {
    throw_invalid(op, std::string(what) + " '" + s +
                          "' is not a C++ identifier (letters, digits and _, not first a digit)");
  }
}

// "2 inputs (x, y)"
std::string counted(size_t n, const char* noun, const std::vector<std::string>& names) {
  std::string s = std::to_string(n) + " " + noun + (n == 1 ? "" : "s") + " (";
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s + ")";
}

// custom_kernel_<name>_<argument>...: one symbol per instantiation. Characters
// that a symbol cannot hold become '_' (the cache is keyed by the whole source,
// so two names that meet here stay two kernels).
std::string kernel_symbol(const std::string& name,
                          const std::vector<std::pair<std::string, TemplateArg>>& args) {
  std::string symbol = "custom_kernel_";
  for (unsigned char c : name) symbol += std::isalnum(c) ? static_cast<char>(c) : '_';
  for (const auto& [arg_name, value] : args) {
    symbol += '_';
    if (const int* i = std::get_if<int>(&value)) {
      symbol += *i < 0 ? "n" + std::to_string(-static_cast<long long>(*i)) : std::to_string(*i);
    } else if (const bool* b = std::get_if<bool>(&value)) {
      symbol += *b ? "t" : "f";
    } else {
      symbol += dtype_name(std::get<Dtype>(value));
    }
  }
  return symbol;
}

// grid: threads per axis (>= 0); threadgroup: threads per block (>= 1), of
// which the block is the part inside the grid (at most 1024 threads).
void check_launch(const char* op, const std::tuple<int, int, int>& grid,
                  const std::tuple<int, int, int>& threadgroup) {
  auto [gx, gy, gz] = grid;
  auto [tx, ty, tz] = threadgroup;
  auto triple = [](int x, int y, int z) {
    return "(" + std::to_string(x) + ", " + std::to_string(y) + ", " + std::to_string(z) + ")";
  };
  if (gx < 0 || gy < 0 || gz < 0) {
    throw_invalid(op, "grid " + triple(gx, gy, gz) + " has a negative size");
  }
  if (tx < 1 || ty < 1 || tz < 1) {
    throw_invalid(op, "threadgroup " + triple(tx, ty, tz) + " must be positive on every axis");
  }
  const long long threads = static_cast<long long>(std::min(tx, std::max(gx, 1))) *
                            std::min(ty, std::max(gy, 1)) * std::min(tz, std::max(gz, 1));
  if (threads > 1024) {
    throw_invalid(op, "threadgroup " + triple(tx, ty, tz) + " has " + std::to_string(threads) +
                          " threads, more than a CUDA block's 1024");
  }
}

void check_shared_memory(const char* op, int bytes) {
  if (bytes < 0) throw_invalid(op, "shared_memory must be at least 0, got " + std::to_string(bytes));
}

void check_outputs(const char* op, const std::vector<Shape>& shapes) {
  for (const auto& shape : shapes) check_non_negative(shape, op);
}

// The stream of a custom kernel: a GPU's.
Stream gpu_stream(const char* op, const std::string& name, StreamOrDevice s) {
  Stream stream = to_stream(s);
  if (stream.device.type != Device::gpu) {
    throw_invalid(op, "the kernel '" + name + "' runs on the GPU only, and its stream is on the cpu" +
                          (is_available(Device::gpu) ? "" : " (there is no CUDA GPU here)"));
  }
  return stream;
}

std::string custom_kernel_source(const std::string& symbol, const std::string& header,
                                 const std::string& body,
                                 const std::vector<std::string>& input_names,
                                 const std::vector<array>& inputs,
                                 const std::vector<ShapeUses>& uses,
                                 const std::vector<std::string>& output_names,
                                 const std::vector<Dtype>& output_dtypes,
                                 const std::vector<std::pair<std::string, TemplateArg>>& args) {
  std::ostringstream src;
  src << kDefaultHeader;
  // cuda::std::complex costs a second of compiling: only where a complex64 appears.
  bool complex = false;
  for (const auto& in : inputs) complex |= in.dtype() == complex64;
  for (Dtype t : output_dtypes) complex |= t == complex64;
  for (const auto& arg : args) {
    const Dtype* t = std::get_if<Dtype>(&arg.second);
    complex |= t && *t == complex64;
  }
  if (complex) src << "#include <cuda/std/complex>\n\n";
  src << header << "\n\nnamespace tessera::cu {\n\nnamespace cg = cooperative_groups;\n\n"
      << "extern \"C\" __global__ void " << symbol << "(";
  const char* separator = "\n    ";
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string& name = input_names[i];
    src << separator << "const " << cuda_type(inputs[i].dtype()) << "* " << name;
    separator = ",\n    ";
    if (uses[i].shape) src << separator << "const __grid_constant__ Shape " << name << "_shape";
    if (uses[i].strides) {
      src << separator << "const __grid_constant__ Strides " << name << "_strides";
    }
    if (uses[i].ndim) src << separator << "const __grid_constant__ int " << name << "_ndim";
  }
  for (size_t i = 0; i < output_names.size(); ++i) {
    src << separator << cuda_type(output_dtypes[i]) << "* " << output_names[i];
  }
  src << ") {\n";
  for (const auto& [name, value] : args) {
    if (const int* i = std::get_if<int>(&value)) {
      src << "  constexpr int " << name << " = " << *i << ";\n";
    } else if (const bool* b = std::get_if<bool>(&value)) {
      src << "  constexpr bool " << name << " = " << (*b ? "true" : "false") << ";\n";
    } else {
      src << "  using " << name << " = " << cuda_type(std::get<Dtype>(value)) << ";\n";
    }
  }
  if (!args.empty()) src << "\n";
  src << body << "\n}\n\n}  // namespace tessera::cu\n";
  return src.str();
}

}  // namespace

CustomKernelFunction cuda_kernel(const std::string& name,
                                 const std::vector<std::string>& input_names,
                                 const std::vector<std::string>& output_names,
                                 const std::string& source, const std::string& header,
                                 bool ensure_row_contiguous, int shared_memory) {
  constexpr const char* op = "cuda_kernel";
  if (output_names.empty()) throw_invalid(op, "the kernel '" + name + "' needs at least one output");
  for (const auto& n : input_names) check_identifier(op, "input name", n);
  for (const auto& n : output_names) check_identifier(op, "output name", n);
  check_shared_memory(op, shared_memory);
  // An input's shape, strides and ndim are parameters only where the body
  // mentions them (as MLX finds them: by name).
  std::vector<ShapeUses> uses;
  for (const auto& n : input_names) {
    uses.push_back({source.find(n + "_shape") != std::string::npos,
                    source.find(n + "_strides") != std::string::npos,
                    source.find(n + "_ndim") != std::string::npos});
  }

  return [=](const std::vector<array>& inputs, const std::vector<Shape>& output_shapes,
             const std::vector<Dtype>& output_dtypes, std::tuple<int, int, int> grid,
             std::tuple<int, int, int> threadgroup,
             std::vector<std::pair<std::string, TemplateArg>> template_args,
             std::optional<float> init_value, bool verbose, StreamOrDevice s) {
    if (inputs.size() != input_names.size()) {
      throw_invalid(op, "the kernel '" + name + "' expected " +
                            counted(input_names.size(), "input", input_names) + ", got " +
                            std::to_string(inputs.size()));
    }
    if (output_shapes.size() != output_names.size()) {
      throw_invalid(op, "the kernel '" + name + "' expected " +
                            counted(output_names.size(), "output shape", output_names) +
                            ", got " + std::to_string(output_shapes.size()));
    }
    if (output_dtypes.size() != output_names.size()) {
      throw_invalid(op, "the kernel '" + name + "' expected " +
                            counted(output_names.size(), "output dtype", output_names) +
                            ", got " + std::to_string(output_dtypes.size()));
    }
    check_outputs(op, output_shapes);
    check_launch(op, grid, threadgroup);
    for (const auto& arg : template_args) check_identifier(op, "template argument name", arg.first);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if ((uses[i].shape || uses[i].strides) && inputs[i].ndim() > kCustomKernelMaxNdim) {
        throw_invalid(op, "input '" + input_names[i] + "' has " +
                              std::to_string(inputs[i].ndim()) + " dimensions, more than the " +
                              std::to_string(kCustomKernelMaxNdim) + " that " + input_names[i] +
                              "_shape and " + input_names[i] + "_strides hold");
      }
    }

    const std::string symbol = kernel_symbol(name, template_args);
    std::string kernel_source = custom_kernel_source(symbol, header, source, input_names, inputs,
                                                     uses, output_names, output_dtypes,
                                                     template_args);
    // Printed before the device is checked, so that any machine shows it.
    if (verbose) {
      std::cout << "Generated source code for `" << symbol << "`:\n```\n"
                << kernel_source << "\n```" << std::endl;
    }
    Stream stream = gpu_stream(op, name, s);
    auto p = std::make_shared<CustomKernel>(stream, symbol, std::move(kernel_source), false, grid,
                                            threadgroup, uses, ensure_row_contiguous, init_value,
                                            std::vector<ScalarArg>{}, shared_memory);
    return array::make_arrays(output_shapes, output_dtypes, p, inputs);
  };
}

std::vector<array> precompiled_cuda_kernel(
    const std::string& name, const std::string& compiled_source,
    const std::vector<array>& inputs, const std::vector<Shape>& output_shapes,
    const std::vector<Dtype>& output_dtypes, const std::vector<ScalarArg>& scalars,
    std::tuple<int, int, int> grid, std::tuple<int, int, int> threadgroup, int shared_memory,
    std::optional<float> init_value, bool ensure_row_contiguous, StreamOrDevice s) {
  constexpr const char* op = "precompiled_cuda_kernel";
  if (name.empty()) throw_invalid(op, "the kernel's name is empty");
  if (compiled_source.empty()) throw_invalid(op, "compiled_source of '" + name + "' is empty");
  if (output_shapes.empty()) throw_invalid(op, "the kernel '" + name + "' needs at least one output");
  if (output_shapes.size() != output_dtypes.size()) {
    throw_invalid(op, "the kernel '" + name + "' got " + std::to_string(output_shapes.size()) +
                          " output shapes and " + std::to_string(output_dtypes.size()) +
                          " output dtypes");
  }
  check_outputs(op, output_shapes);
  check_launch(op, grid, threadgroup);
  check_shared_memory(op, shared_memory);
  Stream stream = gpu_stream(op, name, s);
  auto p = std::make_shared<CustomKernel>(stream, name, compiled_source, true, grid, threadgroup,
                                          std::vector<ShapeUses>(inputs.size()),
                                          ensure_row_contiguous, init_value, scalars,
                                          shared_memory);
  return array::make_arrays(output_shapes, output_dtypes, p, inputs);
}

CustomKernelFunction metal_kernel(const std::string& name, const std::vector<std::string>&,
                                  const std::vector<std::string>&, const std::string&,
                                  const std::string&, bool, bool) {
  return [name](const std::vector<array>&, const std::vector<Shape>&, const std::vector<Dtype>&,
                std::tuple<int, int, int>, std::tuple<int, int, int>,
                std::vector<std::pair<std::string, TemplateArg>>, std::optional<float>, bool,
                StreamOrDevice) -> std::vector<array> {
    throw std::runtime_error("[metal_kernel] cannot run the kernel '" + name +
                             "': Metal is not available (Tessera runs on CPUs and CUDA GPUs); "
                             "fast::cuda_kernel is the CUDA counterpart");
  };
}

}  // namespace tessera::fast
