// The row loop of where (Select) on the CPU, shared by the kernel and the
// fused programs of compile.
#pragma once

#include <array>
#include <cstdint>
#include <type_traits>

namespace tessera::cpu {

// o[i * inc[3]] = c[i * inc[0]] ? x[i * inc[1]] : y[i * inc[2]] for i < n.
// Where c, x (or y) and o are dense and the other operand dense or one value
// (a mask, or a constant such as attention's lowest score), as a blend of
// bit masks, which the compiler vectorises (a ternary on bool it left
// scalar); else one by one. T is an unsigned integer of the element's width.
template <typename T>
void select_row(const bool* cb, const T* x, const T* y, T* o, int64_t n,
                const std::array<int64_t, 4>& inc) {
  const auto* c = reinterpret_cast<const uint8_t*>(cb);
  auto pick = [](uint8_t k, T a, T b) {
    const T m = T(0) - static_cast<T>(k != 0);
    return static_cast<T>((a & m) | (b & static_cast<T>(~m)));
  };
  if constexpr (std::is_unsigned_v<T>) {
    if (inc[0] == 1 && inc[3] == 1) {
      if (inc[1] == 1 && inc[2] == 1) {
        for (int64_t i = 0; i < n; ++i) o[i] = pick(c[i], x[i], y[i]);
        return;
      }
      if (inc[1] == 1 && inc[2] == 0) {
        const T v = *y;
        for (int64_t i = 0; i < n; ++i) o[i] = pick(c[i], x[i], v);
        return;
      }
      if (inc[1] == 0 && inc[2] == 1) {
        const T v = *x;
        for (int64_t i = 0; i < n; ++i) o[i] = pick(c[i], v, y[i]);
        return;
      }
    }
  }
  for (int64_t i = 0; i < n; ++i) o[i * inc[3]] = cb[i * inc[0]] ? x[i * inc[1]] : y[i * inc[2]];
}

}  // namespace tessera::cpu
