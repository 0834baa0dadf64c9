// Random sampling (namespace tessera::random): counter-based and splittable,
// the same numbers as MLX's for the same key on every device (see Note
// [Random bits] in ops/primitives/random.h for the generator).
//
//   auto k = random::key(42);
//   auto [k1, k2] = random::split(k);
//   auto x = random::normal({3, 4}, float32, k1);   // same key, same numbers
//   auto i = random::randint(0, 10, {5}, int32, k2);
//   random::seed(0);                                 // the implicit global key
//   auto u = random::uniform({2});                   // draws from it
//
// A key is a uint32 array of shape (2,); anything else is a ValueError
// (std::invalid_argument). A sampler given no key splits the calling thread's
// global key: the global key becomes row 0 of split(key) and the sampler uses
// row 1. The bits are not differentiable (zero derivative w.r.t. the key);
// samplers differentiate through their affine parts (uniform's bounds,
// normal's loc and scale, ...).
#pragma once

#include <optional>
#include <type_traits>
#include <utility>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera::random {

// Note [Key-only overloads]
// The overloads whose key follows the shape (uniform(shape, key), ...) share
// their argument position with a Dtype or a Shape in a sibling overload. Asking
// whether a Dtype converts to std::optional<array> instantiates array's scalar
// constructor with a non-element type, a hard error; so these overloads are
// templates that accept only keys (array, std::optional<array>, std::nullopt).
template <typename K>
inline constexpr bool is_key_v = std::is_same_v<K, array> ||
                                 std::is_same_v<K, std::optional<array>> ||
                                 std::is_same_v<K, std::nullopt_t>;
#define TESSERA_KEY_ONLY \
  template <typename K = std::nullopt_t, std::enable_if_t<is_key_v<K>, int> = 0>

// The global key of the calling thread (seeded from the clock at first use).
class KeySequence {
 public:
  explicit KeySequence(uint64_t seed);
  void seed(uint64_t seed);
  // Splits the key: keeps row 0, returns row 1.
  array next();
  // The key itself, and replacing it (compile's implicit state: Python's
  // random.state); set_key checks that k is a key.
  const array& key() const { return key_; }
  void set_key(array k);
  static KeySequence& default_();

 private:
  array key_;
};

// The key [seed >> 32, seed & 0xFFFFFFFF] (uint32, shape (2,)).
array key(uint64_t seed);
// Resets the calling thread's global key to key(seed).
void seed(uint64_t seed);

// Random bits of `shape`: uint32 (width 4), uint16 (2) or uint8 (1).
array bits(const Shape& shape, int width, const std::optional<array>& key = std::nullopt,
           StreamOrDevice s = {});
inline array bits(const Shape& shape, const std::optional<array>& key = std::nullopt,
                  StreamOrDevice s = {}) {
  return bits(shape, 4, key, s);
}

// Two new keys (rows 0 and 1 of split(key, 2)).
std::pair<array, array> split(const array& key, StreamOrDevice s = {});
// `num` new keys, shape (num, 2).
array split(const array& key, int num, StreamOrDevice s = {});

// Uniform on [low, high) in a real floating dtype; the bounds broadcast to shape.
array uniform(const array& low, const array& high, const Shape& shape, Dtype dtype = float32,
              const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});
template <typename T, typename U>
array uniform(T low, U high, const Shape& shape, Dtype dtype = float32,
              const std::optional<array>& key = std::nullopt, StreamOrDevice s = {}) {
  return uniform(array(low), array(high), shape, dtype, key, to_stream(s));
}
// Uniform on [0, 1).
array uniform(const Shape& shape, Dtype dtype, const std::optional<array>& key = std::nullopt,
              StreamOrDevice s = {});
TESSERA_KEY_ONLY
array uniform(const Shape& shape, const K& key = std::nullopt, StreamOrDevice s = {}) {
  return uniform(shape, float32, std::optional<array>(key), s);
}

// Standard normal (complex64: real and imaginary parts each N(0, 1/2)), then
// times scale and plus loc where given.
array normal(const Shape& shape, Dtype dtype, const std::optional<array>& loc,
             const std::optional<array>& scale, const std::optional<array>& key,
             StreamOrDevice s = {});
inline array normal(const Shape& shape, Dtype dtype, const float loc, const float scale,
                    const std::optional<array>& key = std::nullopt, StreamOrDevice s = {}) {
  auto loc_ = loc == 0 ? std::nullopt : std::make_optional(array(loc, dtype));
  auto scale_ = scale == 1 ? std::nullopt : std::make_optional(array(scale, dtype));
  return normal(shape, dtype, loc_, scale_, key, s);
}
inline array normal(const Shape& shape, const float loc, const float scale,
                    const std::optional<array>& key = std::nullopt, StreamOrDevice s = {}) {
  return normal(shape, float32, loc, scale, key, s);
}
inline array normal(const Shape& shape, const Dtype dtype,
                    const std::optional<array>& key = std::nullopt, StreamOrDevice s = {}) {
  return normal(shape, dtype, std::nullopt, std::nullopt, key, s);
}
TESSERA_KEY_ONLY
array normal(const Shape& shape, const K& key = std::nullopt, StreamOrDevice s = {}) {
  return normal(shape, float32, std::nullopt, std::nullopt, std::optional<array>(key), s);
}

// Samples (..., n) of N(mean (..., n), cov (..., n, n)); float32 only.
array multivariate_normal(const array& mean, const array& cov, const Shape& shape, Dtype dtype,
                          const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});

// Integers in [low, high), drawn through a float32 uniform.
array randint(const array& low, const array& high, const Shape& shape, Dtype dtype = int32,
              const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});
template <typename T, typename U>
array randint(T low, U high, const Shape& shape, Dtype dtype = int32,
              const std::optional<array>& key = std::nullopt, StreamOrDevice s = {}) {
  return randint(array(low), array(high), shape, dtype, key, to_stream(s));
}

// bool samples, true with probability p (a floating array broadcast to shape).
array bernoulli(const array& p, const Shape& shape, const std::optional<array>& key = std::nullopt,
                StreamOrDevice s = {});
// Of p's shape (bernoulli_like is its body: see Note [Key-only overloads]).
array bernoulli_like(const array& p, const std::optional<array>& key, StreamOrDevice s);
TESSERA_KEY_ONLY
array bernoulli(const array& p, const K& key = std::nullopt, StreamOrDevice s = {}) {
  return bernoulli_like(p, std::optional<array>(key), s);
}
template <typename T, typename K = std::nullopt_t, std::enable_if_t<is_key_v<K>, int> = 0>
array bernoulli(T p, const K& key = std::nullopt, StreamOrDevice s = {}) {
  return bernoulli_like(array(p), std::optional<array>(key), s);
}
template <typename T>
array bernoulli(T p, const Shape& shape, const std::optional<array>& key = std::nullopt,
                StreamOrDevice s = {}) {
  return bernoulli(array(p), shape, key, s);
}
array bernoulli(const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});

// Normal restricted to (lower, upper); the shape defaults to the bounds' broadcast.
array truncated_normal(const array& lower, const array& upper, const Shape& shape,
                       Dtype dtype = float32, const std::optional<array>& key = std::nullopt,
                       StreamOrDevice s = {});
array truncated_normal(const array& lower, const array& upper, Dtype dtype = float32,
                       const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});

// Standard Gumbel (CDF exp(-exp(-x))).
array gumbel(const Shape& shape, Dtype dtype = float32,
             const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});

// Indices (uint32) drawn from softmax(logits) along axis: of `shape` (which
// must broadcast with the logits' shape without axis), with num_samples
// appended, or of the logits' shape without axis.
array categorical(const array& logits, int axis, const Shape& shape,
                  const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});
array categorical(const array& logits_, int axis, int num_samples,
                  const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});
// Of the logits' shape without axis (categorical_along is its body: see Note
// [Key-only overloads]).
array categorical_along(const array& logits, int axis, const std::optional<array>& key,
                        StreamOrDevice s);
TESSERA_KEY_ONLY
array categorical(const array& logits, int axis = -1, const K& key = std::nullopt,
                  StreamOrDevice s = {}) {
  return categorical_along(logits, axis, std::optional<array>(key), s);
}

// Laplace(loc, scale).
array laplace(const Shape& shape, Dtype dtype, const float loc, const float scale,
              const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});
inline array laplace(const Shape& shape, const float loc, const float scale,
                     const std::optional<array>& key = std::nullopt, StreamOrDevice s = {}) {
  return laplace(shape, float32, loc, scale, key, s);
}
inline array laplace(const Shape& shape, const Dtype dtype,
                     const std::optional<array>& key = std::nullopt, StreamOrDevice s = {}) {
  return laplace(shape, dtype, 0.0, 1.0, key, s);
}
TESSERA_KEY_ONLY
array laplace(const Shape& shape, const K& key = std::nullopt, StreamOrDevice s = {}) {
  return laplace(shape, float32, 0.0, 1.0, std::optional<array>(key), s);
}

// x shuffled along axis.
array permutation(const array& x, int axis = 0, const std::optional<array>& key = std::nullopt,
                  StreamOrDevice s = {});
// A random permutation of arange(x) (uint32).
array permutation(int x, const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});

#undef TESSERA_KEY_ONLY

}  // namespace tessera::random
