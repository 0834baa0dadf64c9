#include "tessera/io/bytes.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "tessera/io/io.h"
#include "tessera/ops/creation.h"

namespace tessera::io {

std::string with_extension(std::string file, const std::string& extension) {
  if (file.size() < extension.size() ||
      file.compare(file.size() - extension.size(), extension.size(), extension) != 0) {
    file += extension;
  }
  return file;
}

namespace detail {

Bytes bytes_of(const Reader& in, std::string format) {
  Bytes b;
  b.owner = in.contents();
  b.data = b.owner.get();
  b.size = in.size();
  b.label = in.label();
  b.format = std::move(format);
  return b;
}

void fail(const char* op, const std::string& what) {
  throw std::invalid_argument("[" + std::string(op) + "] " + what);
}

void Cursor::need(size_t count, size_t size, const std::string& what) const {
  size_t left = b_.size - std::min(pos_, b_.size);
  if (pos_ <= b_.size && (size == 0 || count <= left / size)) return;
  std::string n = size == 1 || count <= std::numeric_limits<size_t>::max() / size
                      ? std::to_string(count * size)
                      : std::to_string(count) + " x " + std::to_string(size);
  fail("load", "truncated " + b_.format + " file " + b_.label + ": " + what + " needs " + n +
                   " bytes at byte " + std::to_string(pos_) + ", the file has " +
                   std::to_string(b_.size));
}

size_t element_count(const Shape& shape, const std::string& what) {
  size_t n = 1;
  for (auto d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<size_t>(d), &n)) {
      fail("load", what + " has " + std::to_string(d) + " elements along an axis, which cannot be");
    }
  }
  return n;
}

ShapeElem dimension(uint64_t n, const std::string& what) {
  if (n > static_cast<uint64_t>(std::numeric_limits<ShapeElem>::max())) {
    fail("load", what + " has a dimension of " + std::to_string(n) +
                     ", beyond the 2147483647 elements an axis holds");
  }
  return static_cast<ShapeElem>(n);
}

array array_at(const Bytes& b, size_t offset, Shape shape, Dtype dtype, size_t swap_unit) {
  if (dtype == bool_) {
    // A bool holds 0 or 1, which kernels rely on: other bytes read as True.
    return astype(array_at(b, offset, std::move(shape), uint8, swap_unit), bool_);
  }
  const char* p = b.data + offset;
  size_t nbytes = shape_size(shape) * dtype.size;
  if (swap_unit == 0 && nbytes > 0 && reinterpret_cast<uintptr_t>(p) % dtype.size == 0) {
    return array::borrow(const_cast<char*>(p), std::move(shape), {}, dtype, Device::cpu,
                         [owner = b.owner]() mutable { owner.reset(); });
  }
  array a = new_array(std::move(shape), dtype);
  char* dst = a.data<char>();
  if (swap_unit > 1) {
    for (size_t i = 0; i < nbytes; i += swap_unit) std::reverse_copy(p + i, p + i + swap_unit, dst + i);
  } else if (nbytes) {
    std::memcpy(dst, p, nbytes);
  }
  return a;
}

array new_array(Shape shape, Dtype dtype) {
  size_t n = shape_size(shape) * dtype.size;
  return array(allocator::malloc(n), std::move(shape), dtype);
}

array host_data(const array& a, bool allow_col_major) {
  array x = a;
  x.eval();
  auto f = x.flags();
  if (!(f.row_contiguous || (allow_col_major && f.col_contiguous)) || x.data_size() != x.size()) {
    x = contiguous(x, allow_col_major);
    x.eval();
  }
  return x;
}

const char* bytes_of(const array& a) {
  return a.nbytes() ? static_cast<const char*>(a.raw_data()) : nullptr;
}

std::string repr(std::string_view s) {
  char q = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos
               ? '"'
               : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == q || c == '\\') out += '\\';
    out += c;
  }
  return out + q;
}

}  // namespace detail
}  // namespace tessera::io
