// fast::cuda_kernel and fast::precompiled_cuda_kernel: the generated source
// (printed by verbose, and compiled by NVRTC in a CUDA build, with or without
// a GPU), the argument checks, the refusal of a CPU stream, and the missing
// transform rules of CustomKernel; on a GPU, results of a generated kernel
// with template arguments and init_value, and of a cubin kernel with scalars.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "tessera/ops/primitives/custom_kernel.h"
#include "tessera/tessera.h"
#if defined(TESSERA_CUDA) && TESSERA_CUDA
#include "tessera/backend/cuda/jit.h"
#endif

using namespace tessera;

namespace {

bool have_gpu() { return is_available(Device::gpu); }

#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "needs a GPU"

const char* kExpSource = R"(
    auto elem = cooperative_groups::this_grid().thread_rank();
    T tmp = inp[elem];
    out[elem] = exp(tmp);
)";

fast::CustomKernelFunction exp_kernel() {
  return fast::cuda_kernel("myexp", {"inp"}, {"out"}, kExpSource);
}

// The source that verbose prints for a call on the CPU stream (which the call
// then refuses).
std::string generated_source(const fast::CustomKernelFunction& kernel,
                             const std::vector<array>& inputs,
                             const std::vector<Shape>& output_shapes,
                             const std::vector<Dtype>& output_dtypes,
                             std::vector<std::pair<std::string, fast::TemplateArg>> args) {
  testing::internal::CaptureStdout();
  EXPECT_THROW(kernel(inputs, output_shapes, output_dtypes, {1, 1, 1}, {1, 1, 1}, args,
                      std::nullopt, true, Device::cpu),
               std::invalid_argument);
  std::string out = testing::internal::GetCapturedStdout();
  const size_t begin = out.find("```\n") + 4, end = out.rfind("\n```");
  return out.substr(begin, end - begin);
}

// What `call` throws, or "" if it does not throw std::invalid_argument.
template <typename F>
std::string invalid_argument_message(F call) {
  try {
    call();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// y[i] = ±(a * x[i] + n) for i < n: compiled by NVRTC into a cubin for the
// precompiled kernel's test (the Python test gives the same kernel as PTX).
const char* kScaleShiftSource = R"(
extern "C" __global__ void scale_shift(const float* x, float* y, float a, int n, bool negate) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = negate ? -(a * x[i] + n) : a * x[i] + n;
}
)";

}  // namespace

TEST(CudaKernel, SourceHasTheSignatureAndTemplateArguments) {
  auto kernel = fast::cuda_kernel("scale", {"a", "b"}, {"out"},
                                  "out[0] = a[a_strides[0] * a_shape[1]] + b[0];",
                                  "__device__ int helper() { return 1; }");
  std::string source = generated_source(
      kernel, {zeros({2, 3}), zeros({3}, int32)}, {{2, 3}}, {float16},
      {{"T", float32}, {"N", 4}, {"B", false}, {"M", -7}});
  EXPECT_EQ(source.find("#include <cooperative_groups.h>\n"), 0u);
  EXPECT_NE(source.find("__device__ int helper()"), std::string::npos);
  const std::string expected = R"(extern "C" __global__ void custom_kernel_scale_float32_4_f_n7(
    const float* a,
    const __grid_constant__ Shape a_shape,
    const __grid_constant__ Strides a_strides,
    const int32_t* b,
    __half* out) {
  using T = float;
  constexpr int N = 4;
  constexpr bool B = false;
  constexpr int M = -7;

out[0] = a[a_strides[0] * a_shape[1]] + b[0];
}

}  // namespace tessera::cu
)";
  ASSERT_GE(source.size(), expected.size());
  EXPECT_EQ(source.substr(source.size() - expected.size()), expected);
}

TEST(CudaKernel, ChecksTheNumberOfInputsOutputShapesAndDtypes) {
  auto kernel = fast::cuda_kernel("add", {"x", "y"}, {"out"}, "out[0] = x[0] + y[0];");
  auto run = [&](std::vector<array> in, std::vector<Shape> shapes, std::vector<Dtype> dtypes) {
    return invalid_argument_message([&] {
      kernel(in, shapes, dtypes, {4, 1, 1}, {4, 1, 1}, {}, std::nullopt, false, Device::cpu);
    });
  };
  array x = ones({4});
  EXPECT_EQ(run({x, x, x}, {{4}}, {float32}),
            "[cuda_kernel] the kernel 'add' expected 2 inputs (x, y), got 3");
  EXPECT_EQ(run({x, x}, {{4}, {4}}, {float32}),
            "[cuda_kernel] the kernel 'add' expected 1 output shape (out), got 2");
  EXPECT_EQ(run({x, x}, {{4}}, {}),
            "[cuda_kernel] the kernel 'add' expected 1 output dtype (out), got 0");
  EXPECT_NE(run({x, x}, {{4}}, {float32}).find("runs on the GPU only"), std::string::npos);
}

TEST(CudaKernel, MetalKernelIsMadeButThrowsWhenCalled) {
  auto kernel = fast::metal_kernel("myexp", {"inp"}, {"out"}, "out[0] = inp[0];");
  try {
    kernel({ones({4})}, {{4}}, {float32}, {4, 1, 1}, {4, 1, 1}, {}, std::nullopt, false, {});
    FAIL() << "metal_kernel's kernel ran";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("[metal_kernel] cannot run the kernel 'myexp'"),
              std::string::npos)
        << e.what();
  }
}

TEST(CudaKernel, ChecksNamesLaunchShapeAndSharedMemory) {
  EXPECT_THROW(fast::cuda_kernel("k", {"x"}, {}, ""), std::invalid_argument);
  EXPECT_THROW(fast::cuda_kernel("k", {"x-1"}, {"y"}, ""), std::invalid_argument);
  EXPECT_THROW(fast::cuda_kernel("k", {"x"}, {"2y"}, ""), std::invalid_argument);
  EXPECT_THROW(fast::cuda_kernel("k", {"x"}, {"y"}, "", "", true, -1), std::invalid_argument);
  auto kernel = exp_kernel();
  auto run = [&](std::tuple<int, int, int> grid, std::tuple<int, int, int> group,
                 std::vector<std::pair<std::string, fast::TemplateArg>> args = {}) {
    return invalid_argument_message([&] {
      kernel({ones({4})}, {{4}}, {float32}, grid, group, args, std::nullopt, false, Device::cpu);
    });
  };
  EXPECT_EQ(run({4, 1, 1}, {4, 0, 1}),
            "[cuda_kernel] threadgroup (4, 0, 1) must be positive on every axis");
  EXPECT_EQ(run({4, -1, 1}, {4, 1, 1}), "[cuda_kernel] grid (4, -1, 1) has a negative size");
  EXPECT_EQ(run({2048, 1, 1}, {2048, 1, 1}),
            "[cuda_kernel] threadgroup (2048, 1, 1) has 2048 threads, more than a CUDA block's "
            "1024");
  // The block is the threadgroup cut to the grid, as in MLX.
  EXPECT_NE(run({4, 1, 1}, {2048, 1, 1}).find("GPU only"), std::string::npos);
  EXPECT_NE(run({4, 1, 1}, {4, 1, 1}, {{"not valid", 1}}).find("is not a C++ identifier"),
            std::string::npos);
}

TEST(CudaKernel, RunsOnTheGpuOnly) {
  auto kernel = exp_kernel();
  std::string msg = invalid_argument_message([&] {
    kernel({ones({4})}, {{4}}, {float32}, {4, 1, 1}, {4, 1, 1}, {{"T", float32}}, std::nullopt,
           false, Device::cpu);
  });
  EXPECT_EQ(msg.rfind("[cuda_kernel] the kernel 'myexp' runs on the GPU only, and its stream is "
                      "on the cpu", 0),
            0u)
      << msg;
  msg = invalid_argument_message([&] {
    fast::precompiled_cuda_kernel("scale_shift", "a binary", {ones({4})}, {{4}}, {float32},
                                  {2.0f, 4, true}, {4, 1, 1}, {4, 1, 1}, 0, std::nullopt, false,
                                  Device::cpu);
  });
  EXPECT_EQ(msg.rfind("[precompiled_cuda_kernel] the kernel 'scale_shift' runs on the GPU only",
                      0),
            0u)
      << msg;
  msg = invalid_argument_message([&] {
    fast::precompiled_cuda_kernel("scale_shift", "a binary", {ones({4})}, {{4}},
                                  {float32, float32}, {}, {4, 1, 1}, {4, 1, 1});
  });
  EXPECT_EQ(msg,
            "[precompiled_cuda_kernel] the kernel 'scale_shift' got 1 output shapes and 2 "
            "output dtypes");
}

TEST(CudaKernel, CustomKernelHasNoTransformRules) {
  auto p = std::make_shared<fast::CustomKernel>(
      default_stream(Device::cpu), "k", "", false, std::make_tuple(1, 1, 1),
      std::make_tuple(1, 1, 1), std::vector<fast::ShapeUses>(1), true, std::nullopt,
      std::vector<fast::ScalarArg>{}, 0);
  array x = ones({2});
  EXPECT_THROW(p->vjp({x}, {x}, {0}, {x}), std::runtime_error);
  EXPECT_THROW(p->jvp({x}, {x}, {0}), std::runtime_error);
  EXPECT_THROW(p->vmap({x}, {0}), std::runtime_error);
  try {
    p->vjp({x}, {x}, {0}, {x});
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "[CustomKernel] has no vjp implementation");
  }
  std::vector<array> outputs{x};
  EXPECT_THROW(p->eval_cpu({x}, outputs), std::invalid_argument);
}

#if defined(TESSERA_CUDA) && TESSERA_CUDA
// NVRTC compiles the generated sources (no GPU needed: the architecture is given).
TEST(CudaKernel, GeneratedSourcesCompile) {
  const int arch = have_gpu() ? gpu::jit::device_arch(0) : 90;
  auto strided = fast::cuda_kernel("strided", {"inp"}, {"out"}, R"(
      uint32_t elem = blockIdx.x * blockDim.x + threadIdx.x;
      int64_t loc = 0;
      for (int d = inp_ndim - 1; d >= 0; --d) {
        loc += (elem % inp_shape[d]) * inp_strides[d];
        elem /= inp_shape[d];
      }
      out[blockIdx.x * blockDim.x + threadIdx.x] = T(inp[loc]) * N + (NEG ? -inf : 0.0f);
  )");
  for (Dtype t : {float16, bfloat16, float64, int8, bool_}) {
    SCOPED_TRACE(dtype_name(t));
    std::string source = generated_source(exp_kernel(), {zeros({4}, t)}, {{4}}, {t},
                                          {{"T", float32}});
    EXPECT_NO_THROW(gpu::jit::compile(source, arch, gpu::jit::Headers::toolkit));
    source = generated_source(strided, {zeros({4, 2}, t)}, {{4, 2}}, {float32},
                              {{"T", float32}, {"N", 3}, {"NEG", true}});
    EXPECT_NO_THROW(gpu::jit::compile(source, arch, gpu::jit::Headers::toolkit));
  }
  auto twice = fast::cuda_kernel("twice", {"z"}, {"out"}, "out[0] = z[0] * 2.0f;");
  std::string source = generated_source(twice, {zeros({1}, complex64)}, {{1}}, {complex64}, {});
  EXPECT_NO_THROW(gpu::jit::compile(source, arch, gpu::jit::Headers::toolkit));
  EXPECT_NO_THROW(gpu::jit::compile(kScaleShiftSource, arch));  // the precompiled test's kernel
}
#endif

TEST(CudaKernel, ExpTemplateAndInitValueOnTheGpu) {
  REQUIRE_GPU();
  std::vector<float> v{-2.f, -1.f, 0.f, 0.5f, 1.f, 2.f, 3.f};
  array x(v.begin(), {7}, float32);
  for (Dtype t : {float32, float16}) {
    array a = astype(x, t);
    auto out = exp_kernel()({a}, {a.shape()}, {t}, {7, 1, 1}, {256, 1, 1}, {{"T", float32}},
                            std::nullopt, false, Device::gpu);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dtype(), t);
    array got = astype(out[0], float32, Device::cpu);
    eval(got);
    for (size_t i = 0; i < v.size(); ++i) {
      EXPECT_NEAR(got.data<float>()[i], std::exp(v[i]), t == float16 ? 2e-2 : 1e-5) << i;
    }
  }
  auto add_n = fast::cuda_kernel("add_n", {"x"}, {"y"}, R"(
      uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < x_shape[0] && APPLY) y[i] += static_cast<T>(x[i]) + N;
  )");
  auto out = add_n({x}, {{7}}, {float32}, {7, 1, 1}, {4, 1, 1},
                   {{"T", float32}, {"N", 2}, {"APPLY", true}}, 0.5f, false, Device::gpu);
  eval(out);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_FLOAT_EQ(out[0].data<float>()[i], v[i] + 2.5f);
}

#if defined(TESSERA_CUDA) && TESSERA_CUDA
TEST(CudaKernel, PrecompiledCubinWithScalarsOnTheGpu) {
  REQUIRE_GPU();
  const std::string cubin = gpu::jit::compile(kScaleShiftSource, gpu::jit::device_arch(0));
  std::vector<float> v(50);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  array x(v.begin(), {50}, float32);
  auto out = fast::precompiled_cuda_kernel("scale_shift", cubin, {x}, {{50}}, {float32},
                                           {1.5f, 40, true}, {50, 1, 1}, {32, 1, 1}, 0, 7.0f,
                                           false, Device::gpu);
  eval(out);
  for (size_t i = 0; i < v.size(); ++i) {
    float want = i < 40 ? -(1.5f * v[i] + 40) : 7.0f;  // init_value past n
    EXPECT_FLOAT_EQ(out[0].data<float>()[i], want) << i;
  }
}
#endif
