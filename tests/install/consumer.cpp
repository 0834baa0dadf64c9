#include <tessera/tessera.h>

#include <cstdio>

int main() {
  namespace mx = tessera;
  mx::array a({1.0f, 2.0f, 3.0f});
  mx::array b = mx::astype(mx::broadcast_to(a, {2, 3}), mx::float64);
  mx::eval(b);
  double last = b.data<double>()[5];
  std::printf("%g\n", last);
  return last == 3.0 ? 0 : 1;
}
