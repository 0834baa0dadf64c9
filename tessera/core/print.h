// Printing arrays, NumPy style.
//
//   std::cout << array({1, 2, 3, 4}, {2, 2});
//   // array([[1, 2],
//   //        [3, 4]], dtype=int32)
//   set_printoptions(3);   // floats with 3 digits after the point
#pragma once

#include <ostream>

#include "tessera/core/array.h"

namespace tessera {

struct PrintOptions {
  // Digits after the decimal point for floats; -1: up to 6 significant digits.
  int precision = -1;
};

// The most digits after the point that set_printoptions accepts.
inline constexpr int kMaxPrecision = 100;

// Throws std::invalid_argument for a precision above kMaxPrecision.
void set_printoptions(int precision);
PrintOptions get_printoptions();

// Evaluates a and prints its values and dtype. Arrays of more than 1000
// elements show the first and last 3 entries of each long axis around "...".
std::ostream& operator<<(std::ostream& os, const array& a);

}  // namespace tessera
