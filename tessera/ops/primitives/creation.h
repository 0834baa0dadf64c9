// Primitives that create arrays or reinterpret their memory.
#pragma once

#include <cstdint>

#include "tessera/core/primitive.h"

namespace tessera {

// out[i] = s + i * inc, where s = dtype(start) and inc = dtype(start + step) - s
// (the reference's effective increment). No inputs.
class Arange : public UnaryPrimitive {
 public:
  Arange(Stream s, double start, double step) : UnaryPrimitive(s), start_(start), step_(step) {}
  TESSERA_PRIMITIVE_NO_RULES(Arange, start_, step_)

 private:
  double start_, step_;
};

// out[i] = start + i * (stop - start) / (n - 1) (or / n without endpoint),
// computed in float64; the endpoint is exactly stop. Integer dtypes floor.
class Linspace : public UnaryPrimitive {
 public:
  Linspace(Stream s, double start, double stop, bool endpoint)
      : UnaryPrimitive(s), start_(start), stop_(stop), endpoint_(endpoint) {}
  TESSERA_PRIMITIVE_NO_RULES(Linspace, start_, stop_, endpoint_)

 private:
  double start_, stop_;
  bool endpoint_;
};

// Keeps the elements (i, j) of the last two axes with lo <= j - i <= hi and
// zeroes the others: tril (lo = -inf), triu (hi = +inf), eye (on broadcast ones).
class Band : public UnaryPrimitive {
 public:
  static constexpr int64_t unbounded = int64_t{1} << 40;
  Band(Stream s, int64_t lo, int64_t hi) : UnaryPrimitive(s), lo_(lo), hi_(hi) {}
  TESSERA_PRIMITIVE(Band, lo_, hi_)

 private:
  int64_t lo_, hi_;
};

// The input's bytes read as the output dtype: a view (see view() in creation.h).
class View : public UnaryPrimitive {
 public:
  View(Stream s, Dtype dtype) : UnaryPrimitive(s), dtype_(dtype) {}
  TESSERA_PRIMITIVE(View, dtype_)

 private:
  Dtype dtype_;
};

// A view with `shape`, `strides` and `offset` (elements) over the
// row-contiguous input.
class AsStrided : public UnaryPrimitive {
 public:
  AsStrided(Stream s, Shape shape, Strides strides, int64_t offset)
      : UnaryPrimitive(s), shape_(std::move(shape)), strides_(std::move(strides)),
        offset_(offset) {}
  TESSERA_VIEW_PRIMITIVE(AsStrided, shape_, strides_, offset_)

 private:
  Shape shape_;
  Strides strides_;
  int64_t offset_;
};

}  // namespace tessera
