// What the format files share (not a public header): a loaded file's bytes
// and a cursor that refuses to read past their end, arrays over those bytes,
// the bytes of arrays to save, and little-endian fields.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "tessera/core/array.h"
#include "tessera/io/io.h"

namespace tessera::io::detail {

// Every format here stores little-endian fields, read and written as host values.
static_assert(std::endian::native == std::endian::little,
              "the file formats are read and written on little-endian hosts only");

// A loaded file (or one member of an archive): its bytes, the owner that keeps
// them in memory, and names for messages.
struct Bytes {
  std::shared_ptr<const char> owner;
  const char* data = nullptr;
  size_t size = 0;
  std::string label;   // the file, or "z.npz member 'a.npy'"
  std::string format;  // "npy", "gguf", ...
};
Bytes bytes_of(const Reader& in, std::string format);

// Throws std::invalid_argument "[op] what".
[[noreturn]] void fail(const char* op, const std::string& what);

// Fields read in order, each named in the message when the bytes end first:
// "[load] truncated gguf file m.gguf: the tensor info of 'w' needs 8 bytes at
// byte 96, the file has 100".
class Cursor {
 public:
  explicit Cursor(const Bytes& b, size_t pos = 0) : b_(b), pos_(pos) {}
  size_t pos() const { return pos_; }
  void seek(size_t pos) { pos_ = pos; }
  // Throws unless count items of `size` bytes follow pos().
  void need(size_t count, size_t size, const std::string& what) const;
  template <typename T>
  T get(const std::string& what) {
    need(1, sizeof(T), what);
    T v;
    std::memcpy(&v, b_.data + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string_view take(size_t n, const std::string& what) {
    need(n, 1, what);
    std::string_view v(b_.data + pos_, n);
    pos_ += n;
    return v;
  }

 private:
  const Bytes& b_;
  size_t pos_;
};

template <typename T>
T read_le(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
void put_le(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// The number of elements of a shape read from a file; throws std::invalid_argument
// ("[load] <what> ...") when it does not fit in memory.
size_t element_count(const Shape& shape, const std::string& what);
// A dimension read from a file as a Shape element (int32); throws beyond it.
ShapeElem dimension(uint64_t n, const std::string& what);

// The array of `shape` and `dtype` over the bytes at b.data + offset, which the
// caller checked lie within b: those bytes themselves (no copy) when aligned for
// the dtype, else a copy. swap_unit > 0 copies with the bytes of each unit of
// that size reversed (big-endian data).
array array_at(const Bytes& b, size_t offset, Shape shape, Dtype dtype, size_t swap_unit = 0);
// A new evaluated row-contiguous array for a converter to fill.
array new_array(Shape shape, Dtype dtype);

// `a` evaluated, its elements in row-major order in host memory (a copy when it
// is a view of another layout; column-major is kept with allow_col_major).
array host_data(const array& a, bool allow_col_major = false);
// Pointer to the first byte of such an array (null when it is empty).
const char* bytes_of(const array& a);

// 'name' as Python's repr would quote it, for messages.
std::string repr(std::string_view s);

// A map's entries sorted by name (the order the map-based saves write), and back.
template <typename T>
Entries<T> sorted(const std::unordered_map<std::string, T>& m) {
  Entries<T> out(m.begin(), m.end());
  std::sort(out.begin(), out.end(), [](auto& x, auto& y) { return x.first < y.first; });
  return out;
}
template <typename T>
std::unordered_map<std::string, T> to_map(Entries<T> entries) {
  std::unordered_map<std::string, T> out;
  for (auto& [k, v] : entries) out.insert_or_assign(std::move(k), std::move(v));
  return out;
}

}  // namespace tessera::io::detail
