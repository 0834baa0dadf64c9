// ggml's quantized blocks: Note [GGUF quantized blocks] in gguf_quants.h.
// The K-quant decoders follow ggml's dequantize_row_* step by step; this file
// is compiled without floating-point contraction (CMakeLists.txt), so that
// d * q - m rounds as ggml's reference computes it rather than as one fused
// multiply-add.
#include "tessera/io/gguf_quants.h"

#include <cstring>

#include "tessera/core/half.h"
#include "tessera/io/bytes.h"

namespace tessera::io::detail {

namespace {

enum : uint32_t {
  Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
};

float f16(const uint8_t* p) { return tessera::detail::half_bits_to_float(read_le<uint16_t>(p)); }
uint16_t f16_bits(float f) { return tessera::detail::float_to_half_bits(f); }

// Q4_0 and Q4_1's 32 values: the low nibbles of qs[0..15], then the high ones.
void nibbles(const uint8_t* qs, uint8_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = qs[j] & 0xF;
    q[j + 16] = qs[j] >> 4;
  }
}

void q5(const uint8_t* b, bool with_min, float* y) {
  float d = f16(b);
  float m = with_min ? f16(b + 2) : 0.f;
  int off = with_min ? 4 : 2;
  uint32_t qh = read_le<uint32_t>(b + off);
  const uint8_t* qs = b + off + 4;
  for (int j = 0; j < 16; ++j) {
    int x0 = (qs[j] & 0xF) | (((qh >> j) << 4) & 0x10);
    int x1 = (qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
    if (with_min) {
      y[j] = static_cast<float>(x0) * d + m;
      y[j + 16] = static_cast<float>(x1) * d + m;
    } else {
      y[j] = static_cast<float>(x0 - 16) * d;
      y[j + 16] = static_cast<float>(x1 - 16) * d;
    }
  }
}

void q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  float d = f16(b + 80), dmin = f16(b + 82);
  int i = 0;
  for (int n = 0; n < 2; ++n) {
    const uint8_t* q = qs + 32 * n;
    for (int shift = 0; shift < 8; shift += 2) {
      for (int part = 0; part < 32; part += 16) {
        uint8_t sc = scales[i++];
        float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>((q[l + part] >> shift) & 3) - ml;
      }
    }
  }
}

void q3_k(const uint8_t* b, float* y) {
  const uint8_t* hm = b;
  const uint8_t* qs = b + 32;
  float d = f16(b + 108);
  // The 16 6-bit scales: low 4 bits in bytes 0-7, high 2 bits in bytes 8-11.
  uint32_t aux[3];
  std::memcpy(aux, b + 96, 12);
  const uint32_t k1 = 0x03030303, k2 = 0x0f0f0f0f, tmp = aux[2];
  uint32_t words[4] = {(aux[0] & k2) | (((tmp >> 0) & k1) << 4),
                       (aux[1] & k2) | (((tmp >> 2) & k1) << 4),
                       ((aux[0] >> 4) & k2) | (((tmp >> 4) & k1) << 4),
                       ((aux[1] >> 4) & k2) | (((tmp >> 6) & k1) << 4)};
  int8_t scales[16];
  std::memcpy(scales, words, 16);
  int i = 0;
  uint8_t m = 1;
  for (int n = 0; n < 2; ++n) {
    const uint8_t* q = qs + 32 * n;
    for (int shift = 0; shift < 8; shift += 2) {
      for (int part = 0; part < 32; part += 16) {
        float dl = d * static_cast<float>(scales[i++] - 32);
        for (int l = 0; l < 16; ++l) {
          int v = ((q[l + part] >> shift) & 3) - ((hm[l + part] & m) ? 0 : 4);
          *y++ = dl * static_cast<float>(v);
        }
      }
      m <<= 1;
    }
  }
}

// The j-th (scale, min) of the 12 packed bytes of Q4_K and Q5_K.
void scale_min_k4(int j, const uint8_t* q, int& s, int& m) {
  if (j < 4) {
    s = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    s = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void q45_k(const uint8_t* b, bool five, float* y) {
  float d = f16(b), dmin = f16(b + 2);
  const uint8_t* sc = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = five ? b + 48 : b + 16;
  for (int c = 0; c < 4; ++c) {
    for (int part = 0; part < 2; ++part) {
      int s, m;
      scale_min_k4(2 * c + part, sc, s, m);
      float d1 = d * static_cast<float>(s), m1 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) {
        int q = (ql[32 * c + l] >> (4 * part)) & 0xF;
        if (five && (qh[l] & (1 << (2 * c + part)))) q += 16;
        *y++ = d1 * static_cast<float>(q) - m1;
      }
    }
  }
}

void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  float d = f16(b + 208);
  for (int n = 0; n < 2; ++n) {
    for (int l = 0; l < 32; ++l) {
      int i = l / 16;
      uint8_t lo = ql[64 * n + l], hi = ql[64 * n + l + 32], h = qh[32 * n + l];
      int q[4] = {((lo & 0xF) | (((h >> 0) & 3) << 4)) - 32,
                  ((hi & 0xF) | (((h >> 2) & 3) << 4)) - 32,
                  ((lo >> 4) | (((h >> 4) & 3) << 4)) - 32,
                  ((hi >> 4) | (((h >> 6) & 3) << 4)) - 32};
      for (int p = 0; p < 4; ++p) {
        y[128 * n + 32 * p + l] =
            d * static_cast<float>(sc[8 * n + i + 2 * p]) * static_cast<float>(q[p]);
      }
    }
  }
}

void q8_k(const uint8_t* b, float* y) {
  float d = read_le<float>(b);
  const auto* qs = reinterpret_cast<const int8_t*>(b + 4);
  for (int j = 0; j < 256; ++j) y[j] = d * static_cast<float>(qs[j]);
}

}  // namespace

std::optional<GGMLBlock> ggml_block(uint32_t type) {
  switch (type) {
    case Q4_0: return GGMLBlock{32, 18, true};
    case Q4_1: return GGMLBlock{32, 20, true};
    case Q8_0: return GGMLBlock{32, 34, true};
    case Q5_0: return GGMLBlock{32, 22, false};
    case Q5_1: return GGMLBlock{32, 24, false};
    case Q2_K: return GGMLBlock{256, 84, false};
    case Q3_K: return GGMLBlock{256, 110, false};
    case Q4_K: return GGMLBlock{256, 144, false};
    case Q5_K: return GGMLBlock{256, 176, false};
    case Q6_K: return GGMLBlock{256, 210, false};
    case Q8_K: return GGMLBlock{256, 292, false};
    default: return std::nullopt;
  }
}

std::vector<array> affine_from_blocks(uint32_t type, const char* blocks, const Shape& shape) {
  const int bits = type == Q8_0 ? 8 : 4, per_word = 32 / bits;
  const GGMLBlock blk = *ggml_block(type);
  Shape w_shape = shape, g_shape = shape;
  w_shape.back() = shape.back() / 32 * bits;
  g_shape.back() = shape.back() / 32;
  array w = new_array(w_shape, uint32);
  array scales = new_array(g_shape, float16), biases = new_array(g_shape, float16);
  auto* wp = w.data<uint32_t>();
  auto* sp = reinterpret_cast<uint16_t*>(scales.data<float16_t>());
  auto* bp = reinterpret_cast<uint16_t*>(biases.data<float16_t>());
  const size_t n = scales.size();
  for (size_t i = 0; i < n; ++i) {
    const auto* b = reinterpret_cast<const uint8_t*>(blocks) + i * blk.bytes;
    uint8_t q[32];
    sp[i] = read_le<uint16_t>(b);  // d, exactly
    if (type == Q4_0) {
      nibbles(b + 2, q);
      bp[i] = f16_bits(-8.f * f16(b));
    } else if (type == Q4_1) {
      nibbles(b + 4, q);
      bp[i] = read_le<uint16_t>(b + 2);  // m, exactly
    } else {
      for (int j = 0; j < 32; ++j) q[j] = b[2 + j] ^ 0x80;  // int8 q as q + 128
      bp[i] = f16_bits(-128.f * f16(b));
    }
    for (int k = 0; k < bits; ++k) {
      uint32_t word = 0;
      for (int j = 0; j < per_word; ++j) word |= uint32_t(q[k * per_word + j]) << (j * bits);
      *wp++ = word;
    }
  }
  return {w, scales, biases};
}

array float16_from_blocks(uint32_t type, const char* blocks, const Shape& shape) {
  const GGMLBlock blk = *ggml_block(type);
  array out = new_array(shape, float16);
  auto* op = reinterpret_cast<uint16_t*>(out.data<float16_t>());
  const size_t n = out.size() / blk.values;
  float y[256];
  for (size_t i = 0; i < n; ++i) {
    const auto* b = reinterpret_cast<const uint8_t*>(blocks) + i * blk.bytes;
    switch (type) {
      case Q5_0: q5(b, false, y); break;
      case Q5_1: q5(b, true, y); break;
      case Q2_K: q2_k(b, y); break;
      case Q3_K: q3_k(b, y); break;
      case Q4_K: q45_k(b, false, y); break;
      case Q5_K: q45_k(b, true, y); break;
      case Q6_K: q6_k(b, y); break;
      case Q8_K: q8_k(b, y); break;
    }
    for (int j = 0; j < blk.values; ++j) *op++ = f16_bits(y[j]);
  }
  return out;
}

}  // namespace tessera::io::detail
