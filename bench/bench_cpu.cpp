// CPU benchmarks of the core ops; scripts/bench runs them beside NumPy
// (bench/peers_cpu.py) and prints the ratios.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "mlp.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

array filled(Shape shape, float start) {
  // Deterministic values, evaluated before timing.
  array a = astype(reshape(arange(0, static_cast<int>(shape_size(shape))), shape), float32);
  a = a * (1.0f / 4096.0f) + start;
  eval(a);
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  if (bench::wanted(argc, argv, "overhead_scalar_add_chain")) {
    const int n = 10000;
    double t = bench::time_median([&] {
      array x(0.0f);
      for (int i = 0; i < n; ++i) x = x + 1.0f;
      eval(x);
    });
    bench::report("overhead_scalar_add_chain", t / n, 1, "op");
  }
  if (bench::wanted(argc, argv, "add_f32_1e7")) {
    array a = filled({10000000}, 1.0f), b = filled({10000000}, 2.0f);
    double t = bench::time_median([&] { eval(a + b); });
    bench::report("add_f32_1e7", t, 3.0 * 4e7, "byte");
  }
  if (bench::wanted(argc, argv, "sum_f32_1e7")) {
    array a = filled({10000000}, 0.5f);
    double t = bench::time_median([&] { eval(sum(a)); });
    bench::report("sum_f32_1e7", t, 4e7, "byte");
  }
  if (bench::wanted(argc, argv, "softmax_rows_f32_4096")) {
    array a = filled({4096, 4096}, -8.0f);
    double t = bench::time_median([&] { eval(softmax(a, -1)); });
    bench::report("softmax_rows_f32_4096", t, 2.0 * 4 * 4096 * 4096, "byte");
  }
  if (bench::wanted(argc, argv, "transpose_copy_f32_4096")) {
    array a = filled({4096, 4096}, 0.0f);
    double t = bench::time_median([&] { eval(copy(transpose(a))); });
    bench::report("transpose_copy_f32_4096", t, 2.0 * 4 * 4096 * 4096, "byte");
  }
  if (bench::wanted(argc, argv, "matmul_f32_2048")) {
    array a = filled({2048, 2048}, 0.0f) * 0.001f, b = filled({2048, 2048}, 1.0f) * 0.001f;
    eval(a, b);
    double t = bench::time_median([&] { eval(matmul(a, b)); }, 5, 1);
    bench::report("matmul_f32_2048", t, 2.0 * 2048.0 * 2048.0 * 2048.0, "flop");
  }
  if (bench::wanted(argc, argv, "mlp_value_and_grad_cpu")) {
    // Flops of one step: forward and backward, 3 products of 256x1024x1024 per layer.
    bench::report("mlp_value_and_grad_cpu", bench::mlp_step(Device::cpu),
                  3 * 4 * 2.0 * 256 * 1024 * 1024, "flop");
  }
  if (bench::wanted(argc, argv, "sort_f32_1e7")) {
    // A fixed pseudo-random order (the same as peers_cpu.py): i * 2654435761 mod 2^32.
    std::vector<float> v(10000000);
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = static_cast<float>((i * 2654435761ull) % 4294967296ull) / 4294967296.0f;
    }
    array a(v.begin(), {static_cast<int>(v.size())}, float32);
    eval(a);
    double t = bench::time_median([&] { eval(sort(a)); }, 5, 1);
    bench::report("sort_f32_1e7", t, 4e7, "byte");
  }
  if (bench::wanted(argc, argv, "cumsum_f32_1e7")) {
    array a = filled({10000000}, 0.5f);
    double t = bench::time_median([&] { eval(cumsum(a)); });
    bench::report("cumsum_f32_1e7", t, 2.0 * 4e7, "byte");
  }
  if (bench::wanted(argc, argv, "take_f32_1e7_idx_1e6")) {
    array a = filled({10000000}, 0.0f);
    std::mt19937 gen(0);
    std::uniform_int_distribution<int32_t> dist(0, 10000000 - 1);
    std::vector<int32_t> iv(1000000);
    for (auto& i : iv) i = dist(gen);
    array idx(iv.begin(), {1000000}, int32);
    eval(idx);
    double t = bench::time_median([&] { eval(take(a, idx, 0)); });
    bench::report("take_f32_1e7_idx_1e6", t, 1e6 * (4 + 4 + 4), "byte");
  }
  if (bench::wanted(argc, argv, "solve_f32_1024")) {
    // A diagonally dominant system with one right-hand side.
    array a = filled({1024, 1024}, 0.0f) * 0.001f + eye(1024) * 16.0f;
    array b = filled({1024, 1}, 1.0f);
    eval(a, b);
    double t = bench::time_median([&] { eval(linalg::solve(a, b)); });
    bench::report("solve_f32_1024", t, 2.0 / 3.0 * 1024.0 * 1024.0 * 1024.0, "flop");
  }
  if (bench::wanted(argc, argv, "fft_c64_2p22")) {
    const int n = 1 << 22;
    array a = astype(filled({n}, 0.0f), complex64) +
              astype(filled({n}, 1.0f), complex64) * array(complex64_t(0, 1));
    eval(a);
    double t = bench::time_median([&] { eval(fft::fft(a)); });
    bench::report("fft_c64_2p22", t, 5.0 * n * 22, "flop");
  }
  return 0;
}
