// GPU benchmarks; scripts/gpu-check runs them beside PyTorch (bench/peers_gpu.py)
// and prints the ratios. Every timed run ends with synchronize(), so the time
// covers the GPU work, not only its launch.
#include <string>

#include "bench_util.h"
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
  if (bench::wanted(argc, argv, "host_to_gpu_op_1GiB")) {
    // A GPU op on data created on the host: the upload is part of the time.
    const int n = 1 << 28;
    double t = bench::time_median(
        [&] {
          array h = copy(broadcast_to(array(1.0f), {n}), Device::cpu);
          eval(h);
          run([&] { return multiply(h, array(2.0f), Device::gpu); });
        },
        5, 1);
    bench::report("host_to_gpu_op_1GiB", t, f32 * n, "byte");
  }
  if (bench::wanted(argc, argv, "dispatch_chain_10000")) {
    const int n = 10000;
    array one = filled({1});
    double t = bench::time_median([&] {
      array x = one;
      for (int i = 0; i < n; ++i) x = x + one;
      run([&] { return x; });
    });
    bench::report("dispatch_chain_10000", t / n, 1, "op");
  }
  return 0;
}
