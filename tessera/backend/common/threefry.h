// Threefry-2x32 with 20 rounds and the words of RandomBits, shared by the CPU
// and CUDA kernels (see Note [Random bits] in ops/primitives/random.h).
//
// For one key, B bytes are W = ceil(B / 4) words w[0..W-1], h = W / 2 and
// odd = W % 2: for j < h the pair (w[j], w[j + h + odd]) is
// hash(key, (j, j + h + odd)); when W is odd, w[h] is the first half of
// hash(key, (h, 0)). The bytes are those of the words, little-endian,
// truncated to B. Pair j (0 <= j < h + odd) is the unit of work of a kernel.
#pragma once

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define TESSERA_RANDOM_HD __host__ __device__ __forceinline__
#else
#define TESSERA_RANDOM_HD inline
#endif

namespace tessera::threefry {

struct Pair {
  uint32_t x0, x1;
};

TESSERA_RANDOM_HD uint32_t rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

TESSERA_RANDOM_HD Pair hash(uint32_t k0, uint32_t k1, uint32_t c0, uint32_t c1) {
  const uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  uint32_t x0 = c0 + ks[0];
  uint32_t x1 = c1 + ks[1];
  const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  for (int i = 0; i < 5; ++i) {
    for (int k = 0; k < 4; ++k) {
      x0 += x1;
      x1 = rotl(x1, rot[i % 2][k]);
      x1 ^= x0;
    }
    x0 += ks[(i + 1) % 3];
    x1 += ks[(i + 2) % 3] + uint32_t(i + 1);
  }
  return {x0, x1};
}

// The layout of one key's words.
struct Words {
  int64_t bytes;  // B
  int64_t half;   // h
  int64_t odd;    // W % 2
  TESSERA_RANDOM_HD explicit Words(int64_t b)
      : bytes(b), half(((b + 3) / 4) / 2), odd(((b + 3) / 4) % 2) {}
  // Units of work (pairs) per key.
  TESSERA_RANDOM_HD int64_t pairs() const { return half + odd; }
};

// Writes word w (its bytes that fall below B) at dst, the key's first byte.
// dst is 4-aligned when B % 4 == 0.
TESSERA_RANDOM_HD void store_word(unsigned char* dst, const Words& L, int64_t w, uint32_t v) {
  const int64_t at = 4 * w;
  if (L.bytes % 4 == 0) {
    *reinterpret_cast<uint32_t*>(dst + at) = v;
    return;
  }
  for (int b = 0; b < 4 && at + b < L.bytes; ++b) {
    dst[at + b] = static_cast<unsigned char>(v >> (8 * b));
  }
}

// Computes and stores pair j of one key.
TESSERA_RANDOM_HD void fill_pair(unsigned char* dst, const Words& L, uint32_t k0, uint32_t k1,
                                 int64_t j) {
  if (j < L.half) {
    const int64_t second = j + L.half + L.odd;
    Pair p = hash(k0, k1, uint32_t(j), uint32_t(second));
    store_word(dst, L, j, p.x0);
    store_word(dst, L, second, p.x1);
  } else {
    Pair p = hash(k0, k1, uint32_t(L.half), 0u);
    store_word(dst, L, L.half, p.x0);
  }
}

}  // namespace tessera::threefry
