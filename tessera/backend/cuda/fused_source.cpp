#include "tessera/backend/cuda/fused_source.h"

#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "tessera/backend/cuda/jit_prelude.h"

namespace tessera::gpu {

namespace {

// The generated code's name for the stored type of dtype t.
const char* device_type_name(Dtype t) {
  if (const char* name = c_type_name(t)) return name;
  if (t == float16) return "tessera::jit::half";
  if (t == bfloat16) return "tessera::jit::bfloat16";
  throw std::logic_error("[compile] dtype " + dtype_name(t) + " in a GPU fused kernel (bug)");
}

// The expression of one step on its operands' register names.
std::string step_expression(const FusedStep& step, const std::vector<std::string>& a) {
  switch (step.op) {
    case FusedOp::Select:
      return "(" + a[0] + " ? " + a[1] + " : " + a[2] + ")";
    case FusedOp::AsType:
      return std::string("tessera::jit::cast<") + device_type_name(step.dtype) + ">(" + a[0] + ")";
    case FusedOp::Broadcast:
    case FusedOp::Copy:
      return a[0];
    case FusedOp::Round:
    case FusedOp::NanToNum:
    case FusedOp::IsClose: {
      // The functor with its parameters, each exactly (by its bits).
      std::string e = std::string("tessera::jit::step(tessera::scalar::") + fused_op_name(step.op) + "{{}";
      for (size_t k = 0; k < step.params.size(); ++k) {
        double v = step.params[k];
        e += ", ";
        if (step.op == FusedOp::Round) {
          e += std::to_string(static_cast<int>(v));
        } else if (step.op == FusedOp::IsClose && k == 2) {
          e += v != 0 ? "true" : "false";
        } else {
          uint64_t bits;
          std::memcpy(&bits, &v, sizeof bits);
          e += "__longlong_as_double(" + std::to_string(static_cast<long long>(bits)) + "ll)";
        }
      }
      e += "}, " + a[0];
      if (a.size() > 1) e += ", " + a[1];
      return e + ")";
    }
    default: {
      std::string e = std::string("tessera::jit::step<tessera::scalar::") + fused_op_name(step.op) +
                      ">(" + a[0];
      if (a.size() > 1) e += ", " + a[1];
      return e + ")";
    }
  }
}

}  // namespace

bool fusable_on_gpu(Dtype t) { return t != complex64; }

const std::string& jit_header() {
  static const std::string header = std::string(kJitPrelude) + kJitFunctors + kJitEpilogue;
  return header;
}

std::string fused_source(const FusedProgram& program, const std::vector<Dtype>& input_dtypes,
                         const FusedLayout& layout) {
  return jit_header() + fused_kernel(program, input_dtypes, layout, kFusedKernelName);
}

std::string fused_kernel(const FusedProgram& program, const std::vector<Dtype>& input_dtypes,
                         const FusedLayout& layout, const std::string& name) {
  const size_t n_in = program.num_inputs;
  const size_t nd = layout.shape.size();
  size_t strided = 0;
  for (auto a : layout.access) strided += a == FusedAccess::strided;
  const std::string dims_type = name + "_dims";
  // The parameters, and the same names as arguments.
  std::ostringstream params, names;
  for (size_t i = 0; i < n_in; ++i) {
    params << "const " << device_type_name(input_dtypes[i]) << "* __restrict__ in" << i << ", ";
    names << "in" << i << ", ";
  }
  const std::vector<uint32_t> outputs = program.output_registers();
  for (size_t k = 0; k < outputs.size(); ++k) {
    params << (k ? ", " : "") << device_type_name(program.steps[outputs[k] - n_in].dtype)
           << "* __restrict__ out" << k;
    names << (k ? ", " : "") << "out" << k;
  }
  std::string kernel_params = params.str() + ", long long n";
  if (strided > 0) {
    params << ", const " << dims_type << "& dims";
    names << ", dims";
    kernel_params += ", " + dims_type + " dims";
  }

  std::ostringstream src;
  if (strided > 0) {
    src << "struct " << dims_type << " { int shape[" << nd << "]; long long strides[" << strided
        << "][" << nd << "]; };\n";
  }
  // One element: loads, the steps in registers, the store.
  src << "__device__ __forceinline__ void " << name << "_element(long long i, " << params.str()
      << ") {\n";
  size_t s = 0;
  for (size_t i = 0; i < n_in; ++i) {
    const char* type = device_type_name(input_dtypes[i]);
    src << "  const " << type << " r" << i << " = in" << i;
    switch (layout.access[i]) {
      case FusedAccess::linear: src << "[i];\n"; break;
      case FusedAccess::scalar: src << "[0];\n"; break;
      case FusedAccess::strided:
        src << "[tessera::jit::loc<" << nd << ">(i, dims.shape, dims.strides[" << s++ << "])];\n";
        break;
    }
  }
  for (size_t j = 0; j < program.steps.size(); ++j) {
    const FusedStep& step = program.steps[j];
    std::vector<std::string> args;
    for (uint32_t r : step.args) args.push_back("r" + std::to_string(r));
    const std::string r = "r" + std::to_string(n_in + j);
    src << "  const auto " << r << " = " << step_expression(step, args) << ";\n"
        << "  static_assert(std::is_same_v<decltype(" << r << "), const "
        << device_type_name(step.dtype) << ">, \"the graph's dtype\");\n";
  }
  for (size_t k = 0; k < outputs.size(); ++k) src << "  out" << k << "[i] = r" << outputs[k] << ";\n";
  src << "}\n";
  // Tiles of kFusedBlock * kFusedPerThread elements; full tiles unchecked, so
  // that the loads of a thread's elements are issued together.
  const int tile = kFusedBlock * kFusedPerThread;
  src << "extern \"C\" __global__ void __launch_bounds__(" << kFusedBlock << ") " << name << "("
      << kernel_params << ") {\n"
      << "  for (long long base = (long long)blockIdx.x * " << tile << "; base < n;"
      << " base += (long long)gridDim.x * " << tile << ") {\n"
      << "    if (base + " << tile << " <= n) {\n"
      << "#pragma unroll\n"
      << "      for (int v = 0; v < " << kFusedPerThread << "; ++v) " << name << "_element(base + v * "
      << kFusedBlock << " + threadIdx.x, " << names.str() << ");\n"
      << "    } else {\n"
      << "      for (int v = 0; v < " << kFusedPerThread << "; ++v) {\n"
      << "        const long long i = base + v * " << kFusedBlock << " + threadIdx.x;\n"
      << "        if (i < n) " << name << "_element(i, " << names.str() << ");\n"
      << "      }\n    }\n  }\n}\n";
  return src.str();
}

}  // namespace tessera::gpu
