// GPU benchmarks; scripts/gpu-check runs them beside PyTorch (bench/peers_gpu.py)
// and prints the ratios. Every timed run ends with synchronize(), so the time
// covers the GPU work, not only its launch.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"
#include "mlp.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

// Values in [0, 1), evaluated on the GPU before timing.
array filled(Shape shape, Dtype dtype = float32) {
  size_t n = shape_size(shape);
  array a = astype(reshape(remainder(arange(0, static_cast<int>(n)), array(1021)), shape), float32);
  a = astype(a * (1.0f / 1021.0f), dtype);
  eval(a);
  synchronize();
  return a;
}

void run(const std::function<array()>& f) {
  eval(f());
  synchronize();
}


}  // namespace

int main(int argc, char** argv) {
  if (!is_available(Device::gpu)) {
    std::fprintf(stderr, "bench_gpu: no GPU\n");
    return 1;
  }
  const int n28 = 1 << 28;
  const double f32 = 4.0;
  if (bench::wanted(argc, argv, "copy_f32_2^28")) {
    array a = filled({n28});
    bench::report("copy_f32_2^28", bench::time_median([&] { run([&] { return copy(a); }); }),
                  2 * f32 * n28, "byte");
  }
  if (bench::wanted(argc, argv, "add_f32_2^28")) {
    array a = filled({n28}), b = filled({n28});
    bench::report("add_f32_2^28", bench::time_median([&] { run([&] { return a + b; }); }),
                  3 * f32 * n28, "byte");
  }
  if (bench::wanted(argc, argv, "multiply_f32_2^28")) {
    array a = filled({n28}), b = filled({n28});
    bench::report("multiply_f32_2^28", bench::time_median([&] { run([&] { return a * b; }); }),
                  3 * f32 * n28, "byte");
  }
  const int R = 8192, C = 32768;
  if (bench::wanted(argc, argv, "broadcast_add_8192x32768")) {
    array a = filled({R, C}), b = filled({C});
    bench::report("broadcast_add_8192x32768",
                  bench::time_median([&] { run([&] { return a + b; }); }),
                  f32 * (2.0 * R * C + C), "byte");
  }
  if (bench::wanted(argc, argv, "transpose_copy_8192x32768")) {
    array a = filled({R, C});
    bench::report("transpose_copy_8192x32768",
                  bench::time_median([&] { run([&] { return copy(transpose(a)); }); }),
                  2 * f32 * R * C, "byte");
  }
  if (bench::wanted(argc, argv, "sum_all_f32_2^28")) {
    array a = filled({n28});
    bench::report("sum_all_f32_2^28", bench::time_median([&] { run([&] { return sum(a); }); }),
                  f32 * n28, "byte");
  }
  if (bench::wanted(argc, argv, "sum_rows_8192x32768")) {
    array a = filled({R, C});
    bench::report("sum_rows_8192x32768",
                  bench::time_median([&] { run([&] { return sum(a, 1); }); }), f32 * R * C,
                  "byte");
  }
  if (bench::wanted(argc, argv, "sum_cols_8192x32768")) {
    array a = filled({R, C});
    bench::report("sum_cols_8192x32768",
                  bench::time_median([&] { run([&] { return sum(a, 0); }); }), f32 * R * C,
                  "byte");
  }
  if (bench::wanted(argc, argv, "softmax_rows_8192x32768")) {
    array a = filled({R, C});
    bench::report("softmax_rows_8192x32768",
                  bench::time_median([&] { run([&] { return softmax(a, -1); }); }),
                  2 * f32 * R * C, "byte");
  }
  if (bench::wanted(argc, argv, "matmul_bf16_8192")) {
    array a = filled({8192, 8192}, bfloat16), b = filled({8192, 8192}, bfloat16);
    bench::report("matmul_bf16_8192",
                  bench::time_median([&] { run([&] { return matmul(a, b); }); }, 5, 2),
                  2.0 * 8192.0 * 8192.0 * 8192.0, "flop");
  }
  if (bench::wanted(argc, argv, "matmul_f32_4096")) {
    array a = filled({4096, 4096}), b = filled({4096, 4096});
    bench::report("matmul_f32_4096",
                  bench::time_median([&] { run([&] { return matmul(a, b); }); }, 5, 2),
                  2.0 * 4096.0 * 4096.0 * 4096.0, "flop");
  }
  const double bf16 = 2.0;
  for (bool rms : {true, false}) {
    const std::string name = rms ? "rms_norm_bf16_8192x8192" : "layer_norm_bf16_8192x8192";
    if (!bench::wanted(argc, argv, name)) continue;
    // Bytes: x read and y written once (the backward pass: x and the
    // cotangent read, dx written); weight and bias are negligible.
    const int n = 8192;
    array x = filled({n, n}, bfloat16), w = filled({n}, bfloat16), b = filled({n}, bfloat16);
    array g = filled({n, n}, bfloat16);
    VecFn f = [rms](const std::vector<array>& a) {
      return std::vector{rms ? fast::rms_norm(a[0], a[1], 1e-5f)
                             : fast::layer_norm(a[0], a[1], a[2], 1e-5f)};
    };
    std::vector<array> in{x, w};
    if (!rms) in.push_back(b);
    bench::report(name, bench::time_median([&] { run([&] { return f(in)[0]; }); }),
                  2 * bf16 * n * n, "byte");
    bench::report(name + "_bwd", bench::time_median([&] {
                    eval(vjp(f, in, {g}).second);
                    synchronize();
                  }),
                  3 * bf16 * n * n, "byte");
  }
  for (const Shape& shape : {Shape{1, 32, 4096, 128}, Shape{4, 32, 4096, 128}}) {
    std::string name = "rope_bf16";
    for (size_t i = 0; i < shape.size(); ++i) name += (i ? "x" : "_") + std::to_string(shape[i]);
    if (!bench::wanted(argc, argv, name)) continue;
    array x = filled(shape, bfloat16);
    bench::report(name,
                  bench::time_median([&] {
                    run([&] { return fast::rope(x, 128, false, 10000.0f, 1.0f, 0); });
                  }),
                  2 * bf16 * static_cast<double>(shape_size(shape)), "byte");
  }
  if (bench::wanted(argc, argv, "host_to_gpu_op_1GiB")) {
    // A GPU op on a 1 GiB array created on the host: each run writes the host
    // copy (data<T>() for writing makes the device copy stale), so the upload
    // is part of the time.
    const int n = 1 << 28;
    array h = copy(broadcast_to(array(1.0f), {n}), Device::cpu);
    eval(h);
    double t = bench::time_median(
        [&] {
          h.data<float>()[0] = 1.0f;
          run([&] { return multiply(h, array(2.0f), Device::gpu); });
        },
        5, 1);
    bench::report("host_to_gpu_op_1GiB", t, f32 * n, "byte");
  }
  if (bench::wanted(argc, argv, "chunks16")) {
    // 16 chunks of 64 MiB created on the host, each multiplied by a resident
    // 4096x2048 matrix: uploads alone, compute alone (chunks already on the
    // GPU), and both in one evaluation, where the prefetcher overlaps them.
    const int chunks = 16, rows = 4096, cols = 4096;
    array w = filled({cols, 2048});
    std::vector<array> host;
    for (int i = 0; i < chunks; ++i) {
      host.push_back(copy(broadcast_to(array(static_cast<float>(i) / chunks), {rows, cols}),
                          Device::cpu));
    }
    eval(host);
    auto stale = [&] {
      for (auto& h : host) h.data<float>()[0] = 0.0f;
    };
    auto results = [&](bool compute) {
      std::vector<array> out;
      for (auto& h : host) out.push_back(compute ? matmul(h, w, Device::gpu) : sum(h, false, Device::gpu));
      eval(out);
      synchronize();
    };
    double up = bench::time_median([&] { stale(); results(false); }, 5, 1);
    double comp = bench::time_median([&] { results(true); }, 5, 1);
    double both = bench::time_median([&] { stale(); results(true); }, 5, 1);
    bench::report("chunks16_upload_only", up, f32 * rows * cols * chunks, "byte");
    bench::report("chunks16_compute_only", comp, 2.0 * rows * cols * 2048.0 * chunks, "flop");
    bench::report("chunks16_upload_and_compute", both, f32 * rows * cols * chunks, "byte");
    std::fprintf(stderr, "chunks16: upload %.2f ms, compute %.2f ms, both %.2f ms: %.3f x the larger\n",
                 up * 1e3, comp * 1e3, both * 1e3, both / std::max(up, comp));
  }
  if (bench::wanted(argc, argv, "oversubscribe_12GiB_limit_8GiB")) {
    // A reduction over 12 GiB of host-created data with the device limited to
    // 8 GiB: device copies are evicted as the sum goes on.
    const int n = 1 << 28;
    std::vector<array> host;
    for (int i = 0; i < 12; ++i) host.push_back(copy(broadcast_to(array(1.0f), {n}), Device::cpu));
    eval(host);
    size_t old = set_memory_limit(size_t{8} << 30);
    auto t0 = std::chrono::steady_clock::now();
    array total = array(0.0f);
    for (auto& h : host) total = add(total, sum(h, false, Device::gpu), Device::gpu);
    float got = total.item<float>();
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    set_memory_limit(old);
    double want = 12.0 * n;
    if (std::abs(got - want) > want * 1e-6) {
      std::fprintf(stderr, "oversubscribe: sum is %g, expected %g\n", got, want);
      return 1;
    }
    bench::report("oversubscribe_12GiB_limit_8GiB", t, 12.0 * f32 * n, "byte");
  }
  if (bench::wanted(argc, argv, "dispatch_chain_10000")) {
    const int n = 10000;
    array one = filled({1});
    double build = 0, launched = 0;
    double t = bench::time_median([&] {
      auto t0 = std::chrono::steady_clock::now();
      array x = one;
      for (int i = 0; i < n; ++i) x = x + one;
      auto t1 = std::chrono::steady_clock::now();
      eval(x);
      auto t2 = std::chrono::steady_clock::now();
      synchronize();
      build = std::chrono::duration<double>(t1 - t0).count();
      launched = std::chrono::duration<double>(t2 - t0).count();
    });
    bench::report("dispatch_chain_10000", t / n, 1, "op");
    std::fprintf(stderr,
                 "dispatch: %.3f us/op; graph built after %.3f us/op, kernels queued after %.3f "
                 "us/op\n",
                 t / n * 1e6, build / n * 1e6, launched / n * 1e6);
  }
  {
    // Attention, bfloat16 (B, N, T, D) = (4, 32, 4096, 128); causal counts half
    // the flops of 2 products (forward), 7 products with the backward pass.
    const int B = 4, N = 32, T = 4096, D = 128;
    const double fwd_flop = 4.0 * B * N * double(T) * T * D / 2;
    const float scale = 1.0f / std::sqrt(float(D));
    if (bench::wanted(argc, argv, "sdpa_causal_bf16_4x32x4096x128_fwd")) {
      array q = filled({B, N, T, D}, bfloat16), k = filled({B, N, T, D}, bfloat16),
            v = filled({B, N, T, D}, bfloat16);
      bench::report("sdpa_causal_bf16_4x32x4096x128_fwd",
                    bench::time_median([&] {
                      run([&] { return fast::scaled_dot_product_attention(q, k, v, scale, "causal"); });
                    }, 10, 3),
                    fwd_flop, "flop");
    }
    if (bench::wanted(argc, argv, "sdpa_causal_bf16_4x32x4096x128_fwd_bwd")) {
      array q = filled({B, N, T, D}, bfloat16), k = filled({B, N, T, D}, bfloat16),
            v = filled({B, N, T, D}, bfloat16), d_o = filled({B, N, T, D}, bfloat16);
      auto f = [&](const std::vector<array>& a) {
        return std::vector{fast::scaled_dot_product_attention(a[0], a[1], a[2], scale, "causal")};
      };
      bench::report("sdpa_causal_bf16_4x32x4096x128_fwd_bwd",
                    bench::time_median([&] {
                      auto [outs, grads] = vjp(f, {q, k, v}, {d_o});
                      eval(grads);
                      synchronize();
                    }, 10, 3),
                    3.5 * fwd_flop, "flop");
    }
    if (bench::wanted(argc, argv, "sdpa_decode_bf16_32q_8kv_32k")) {
      // One query of 32 heads against a 32k cache of 8 k/v heads: the bytes of k and v.
      const int Tkv = 32768;
      array q = filled({1, 32, 1, D}, bfloat16), k = filled({1, 8, Tkv, D}, bfloat16),
            v = filled({1, 8, Tkv, D}, bfloat16);
      bench::report("sdpa_decode_bf16_32q_8kv_32k",
                    bench::time_median([&] {
                      run([&] { return fast::scaled_dot_product_attention(q, k, v, scale); });
                    }, 20, 3),
                    2.0 * 8 * Tkv * D * 2, "byte");
    }
  }
  for (auto [name, d] : {std::pair{"mlp_value_and_grad_gpu", Device::gpu},
                         std::pair{"mlp_value_and_grad_cpu", Device::cpu}}) {
    if (bench::wanted(argc, argv, name)) {
      // Flops of one step: forward and backward, 3 products of 256x1024x1024 per layer.
      bench::report(name, bench::mlp_step(d), 3 * 4 * 2.0 * 256 * 1024 * 1024, "flop");
    }
  }
  return 0;
}
