// Trains a two-layer perceptron on synthetic data with the function
// transforms: value_and_grad gives the loss and the gradients, and plain SGD
// updates the weights. Runs on the GPU when there is one (the default device),
// else on the CPU.
//
// The task: regress y = sin(3 x0) + x1^2 - x0 x1 from 4096 points of [-1, 1]^2.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "tessera/tessera.h"

namespace mx = tessera;

namespace {

// Values drawn on the host: uniform in [-scale, scale).
mx::array uniform(mx::Shape shape, float scale, std::mt19937& gen) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(mx::shape_size(shape));
  for (auto& x : v) x = dist(gen);
  return mx::array(v.begin(), shape, mx::float32);
}

// params = {w1 (2, H), b1 (H), w2 (H, 1), b2 (1)}; x (N, 2) -> (N, 1).
mx::array forward(const std::vector<mx::array>& p, const mx::array& x) {
  mx::array h = mx::tanh(mx::add(mx::matmul(x, p[0]), p[1]));
  return mx::add(mx::matmul(h, p[2]), p[3]);
}

}  // namespace

int main() {
  std::mt19937 gen(7);
  const int n = 4096, hidden = 64, steps = 1000;
  const float lr = 0.1f;

  mx::array x = uniform({n, 2}, 1.0f, gen);
  mx::array x0 = mx::slice(x, {0, 0}, {n, 1}), x1 = mx::slice(x, {0, 1}, {n, 2});
  mx::array y = mx::add(mx::subtract(mx::sin(mx::multiply(x0, mx::array(3.0f))),
                                     mx::multiply(x0, x1)),
                        mx::multiply(x1, x1));
  mx::eval(x, y);

  std::vector<mx::array> params{uniform({2, hidden}, 1.0f, gen), mx::zeros({hidden}),
                                uniform({hidden, 1}, 1.0f / std::sqrt(float(hidden)), gen),
                                mx::zeros({1})};
  // The loss of all parameters; the data are constants of the closure.
  auto loss_fn = [&](const std::vector<mx::array>& p) {
    mx::array err = mx::subtract(forward(p, x), y);
    return mx::mean(mx::multiply(err, err));
  };
  auto step_fn = mx::value_and_grad(loss_fn, std::vector<int>{0, 1, 2, 3});

  std::printf("training a 2-%d-1 perceptron on %d points, on the %s\n", hidden, n,
              mx::default_device() == mx::Device::gpu ? "GPU" : "CPU");
  auto t0 = std::chrono::steady_clock::now();
  float first = 0, loss = 0;
  for (int s = 0; s < steps; ++s) {
    auto [value, grads] = step_fn(params);
    for (size_t i = 0; i < params.size(); ++i) {
      params[i] = mx::subtract(params[i], mx::multiply(grads[i], mx::array(lr)));
    }
    mx::eval(params);
    if (s == 0 || (s + 1) % 200 == 0) {
      loss = value.item<float>();
      if (s == 0) first = loss;
      std::printf("step %4d  loss %.5f\n", s + 1, loss);
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%d steps in %.2f s (%.0f steps/s); loss %.5f -> %.5f\n", steps, secs, steps / secs,
              first, loss);
  // The mean of y^2 is about 0.8: a loss under 0.01 means the fit is close.
  if (!(loss < 0.01f)) {
    std::printf("the loss did not fall below 0.01\n");
    return 1;
  }
  return 0;
}
