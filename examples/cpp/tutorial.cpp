// A tour of Tessera: arrays, lazy evaluation, devices and streams, and a small
// linear-algebra computation (least squares by the normal equations, solved
// with gradient steps written in plain ops).
#include <cstdio>
#include <iostream>

#include "tessera/core/print.h"
#include "tessera/tessera.h"

namespace mx = tessera;

int main() {
  std::cout << "== Arrays\n";
  mx::array a({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2});
  mx::array b = mx::arange(4, mx::float32);
  std::cout << "a = " << a << "\n";
  std::cout << "b = " << b << "\n";
  std::cout << "a.T + 10 = " << mx::transpose(a) + 10.0f << "\n";

  std::cout << "\n== Lazy evaluation\n";
  mx::array c = mx::exp(a) * 2.0f;
  std::cout << "c = exp(a) * 2 is recorded, not computed: evaluated? "
            << (c.is_available() ? "yes" : "no") << "\n";
  mx::eval(c);
  std::cout << "after eval(c): evaluated? " << (c.is_available() ? "yes" : "no") << ", c = " << c
            << "\n";

  std::cout << "\n== Devices and streams\n";
  std::cout << "default device: " << mx::default_device() << "\n";
  std::cout << "GPU available: " << (mx::is_available(mx::Device::gpu) ? "yes" : "no") << "\n";
  mx::Stream s1 = mx::new_stream(mx::default_device());
  mx::Stream s2 = mx::new_stream(mx::default_device());
  mx::array x = mx::multiply(a, a, s1);   // runs on s1
  mx::array y = mx::sum(x, s2);           // runs on s2, waits for s1
  std::cout << "sum(a * a) computed across " << s1 << " and " << s2 << ": " << y.item<float>()
            << "\n";

  std::cout << "\n== Linear algebra: fit y = X w by gradient descent\n";
  const int n = 256, d = 4;
  // Column j is a sinusoid of frequency 0.37 (j + 1): independent columns.
  mx::array i = mx::reshape(mx::arange(n, mx::float32), {n, 1});
  mx::array j = mx::reshape(mx::arange(d, mx::float32), {1, d});
  mx::array X = mx::sin(0.37f * (j + 1.0f) * i + j);
  mx::array w_true({0.5f, -1.0f, 2.0f, 0.25f}, {d, 1});
  mx::array Y = mx::matmul(X, w_true);
  mx::array w = mx::zeros({d, 1});
  mx::array XtX = mx::matmul(mx::transpose(X), X) / static_cast<float>(n);
  mx::array XtY = mx::matmul(mx::transpose(X), Y) / static_cast<float>(n);
  for (int step = 0; step < 500; ++step) {
    w = w - 0.5f * (mx::matmul(XtX, w) - XtY);
    if (step % 100 == 0) mx::eval(w);
  }
  mx::array residual = mx::mean(mx::square(mx::matmul(X, w) - Y));
  std::cout << "recovered w = " << mx::reshape(w, {d}) << "\n";
  std::cout << "true w      = " << mx::reshape(w_true, {d}) << "\n";
  std::printf("mean squared residual: %.3g\n", residual.item<float>());

  std::cout << "\n== Memory\n";
  std::printf("active %zu bytes, peak %zu bytes, cache %zu bytes\n", mx::get_active_memory(),
              mx::get_peak_memory(), mx::get_cache_memory());
  return 0;
}
