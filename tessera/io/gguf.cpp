// .gguf files.
//
// Note [The GGUF layout]
// Little-endian, version 2 or 3 (version 1 had 32-bit counts; big-endian files
// show a byte-swapped version and are refused):
//   "GGUF", version (uint32), tensor count, metadata count (uint64)
//   metadata: key (string), value type (uint32), value
//   tensor infos: name (string), n_dims (uint32), dims (uint64 each, ggml
//                 order: the first is the row length, our last axis), ggml type
//                 (uint32), offset (uint64, from the start of the data)
//   padding to the alignment (metadata general.alignment, else 32)
//   data: each tensor at its offset; writers pad each to the alignment
// A string is a uint64 length and that many bytes (UTF-8, no terminator).
// Value types: 0 uint8, 1 int8, 2 uint16, 3 int16, 4 uint32, 5 int32,
// 6 float32, 7 bool (one byte), 8 string, 9 array (element type uint32, count
// uint64, elements; arrays of arrays are refused), 10 uint64, 11 int64,
// 12 float64. Scalars load as 0-d arrays, arrays as 1-D ones (lists of
// strings for strings). Plain tensor types: 0 F32, 1 F16, 24 I8, 25 I16,
// 26 I32, 27 I64, 28 F64, 30 BF16; quantized ones: gguf_quants.h.
#include <cstring>
#include <optional>
#include <set>

#include "tessera/io/bytes.h"
#include "tessera/io/gguf_quants.h"
#include "tessera/ops/utils.h"

namespace tessera {

namespace io {

namespace {

using namespace detail;  // the byte readers and writers of bytes.h

constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint32_t kVersion = 3;
constexpr uint64_t kAlignment = 32;
constexpr uint32_t kString = 8, kArray = 9;
constexpr const char* kAlignmentKey = "general.alignment";

// Metadata value type <-> dtype (the numeric ones and bool).
std::optional<Dtype> value_dtype(uint32_t t) {
  switch (t) {
    case 0: return uint8;
    case 1: return int8;
    case 2: return uint16;
    case 3: return int16;
    case 4: return uint32;
    case 5: return int32;
    case 6: return float32;
    case 7: return bool_;
    case 10: return uint64;
    case 11: return int64;
    case 12: return float64;
    default: return std::nullopt;
  }
}

// Plain ggml tensor type <-> dtype.
std::optional<Dtype> tensor_dtype(uint32_t t) {
  switch (t) {
    case 0: return float32;
    case 1: return float16;
    case 24: return int8;
    case 25: return int16;
    case 26: return int32;
    case 27: return int64;
    case 28: return float64;
    case 30: return bfloat16;
    default: return std::nullopt;
  }
}

std::string type_name(uint32_t t) {
  static const char* names[] = {
      "F32",  "F16",    "Q4_0",    "Q4_1",    "",       "",       "Q5_0",    "Q5_1",
      "Q8_0", "Q8_1",   "Q2_K",    "Q3_K",    "Q4_K",   "Q5_K",   "Q6_K",    "Q8_K",
      "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S",  "IQ4_XS",
      "I8",   "I16",    "I32",     "I64",     "F64",    "IQ1_M",  "BF16",    "",
      "",     "",       "TQ1_0",   "TQ2_0",   "",       "",       "",        "MXFP4"};
  std::string name = t < std::size(names) ? names[t] : "";
  return (name.empty() ? "unknown" : name) + " (" + std::to_string(t) + ")";
}

std::string read_string(Cursor& c, const std::string& what) {
  uint64_t n = c.get<uint64_t>(what);
  return std::string(c.take(n, what));
}

// `count` values of the numeric or bool type `dtype`, as an array of `shape`.
array read_values(Cursor& c, const Bytes& b, Dtype dtype, uint64_t count, Shape shape,
                  const std::string& what) {
  c.need(count, dtype.size, what);
  array a = detail::new_array(std::move(shape), dtype);
  if (count) std::memcpy(a.data<char>(), b.data + c.pos(), count * dtype.size);
  if (dtype == bool_) {
    for (auto *p = a.data<uint8_t>(), *e = p + count; p != e; ++p) *p = *p != 0;
  }
  c.seek(c.pos() + count * dtype.size);
  return a;
}

GGUFMetaData read_value(Cursor& c, const Bytes& b, const std::string& key) {
  std::string what = "metadata " + repr(key);
  uint32_t type = c.get<uint32_t>("the type of " + what);
  if (type == kString) return read_string(c, what);
  if (auto dtype = value_dtype(type)) return read_values(c, b, *dtype, 1, {}, what);
  if (type != kArray) {
    fail("load", "gguf " + what + " of " + b.label + " has the unknown value type " +
                     std::to_string(type));
  }
  uint32_t etype = c.get<uint32_t>("the array header of " + what);
  uint64_t count = c.get<uint64_t>("the array header of " + what);
  if (etype == kString) {
    std::vector<std::string> strings;
    for (uint64_t i = 0; i < count; ++i) strings.push_back(read_string(c, what));
    return strings;
  }
  if (auto dtype = value_dtype(etype)) {
    c.need(count, dtype->size, what);
    return read_values(c, b, *dtype, count, {detail::dimension(count, what)}, what);
  }
  fail("load", "gguf " + what + " of " + b.label + " is " +
                   (etype == kArray ? std::string("an array of arrays")
                                    : "an array of the unknown value type " + std::to_string(etype)) +
                   ", which is not supported");
}

struct TensorInfo {
  std::string name;
  Shape shape;
  uint32_t type;
  uint64_t offset;
};

// Adds the arrays of one tensor to `out`; the data section starts at byte `data` of b.
void read_tensor(const Bytes& b, const TensorInfo& t, uint64_t data, Entries<array>& out,
                 std::set<std::string>& names) {
  std::string what = "tensor " + repr(t.name);
  std::string where = "gguf " + what + " of " + b.label;
  size_t count = detail::element_count(t.shape, where);
  auto plain = tensor_dtype(t.type);
  auto block = detail::ggml_block(t.type);
  if (!plain && !block) {
    fail("load", where + " has ggml type " + type_name(t.type) + ", which is not supported");
  }
  if (block && (t.shape.empty() || t.shape.back() % block->values)) {
    fail("load", where + " of type " + type_name(t.type) + " has shape " + shape_str(t.shape) +
                     ", whose last axis is not a multiple of " + std::to_string(block->values));
  }
  size_t unit = plain ? plain->size : block->bytes;
  size_t units = plain ? count : count / block->values;
  uint64_t at;
  if (__builtin_add_overflow(data, t.offset, &at) || at > b.size) {
    fail("load", "truncated gguf file " + b.label + ": the data of " + what + " at offset " +
                     std::to_string(t.offset) + " of the data section (byte " +
                     std::to_string(data) + ") lies past the end of the file, which has " +
                     std::to_string(b.size) + " bytes");
  }
  Cursor(b, at).need(units, unit, "the data of " + what);
  std::vector<std::pair<std::string, array>> arrays;
  if (plain) {
    arrays.emplace_back(t.name, detail::array_at(b, at, t.shape, *plain));
  } else if (block->affine) {
    auto triple = detail::affine_from_blocks(t.type, b.data + at, t.shape);
    std::string base = t.name;
    if (base.size() >= 7 && base.compare(base.size() - 7, 7, ".weight") == 0) base.resize(base.size() - 7);
    arrays = {{t.name, triple[0]}, {base + ".scales", triple[1]}, {base + ".biases", triple[2]}};
  } else {
    arrays.emplace_back(t.name, detail::float16_from_blocks(t.type, b.data + at, t.shape));
  }
  for (auto& [name, a] : arrays) {
    if (!names.insert(name).second) {
      fail("load", where + " gives the array " + repr(name) + ", which the file already has");
    }
    out.emplace_back(name, a);
  }
}

// ---- writing ----------------------------------------------------------------

void put_string(std::string& s, const std::string& v) {
  put_le(s, static_cast<uint64_t>(v.size()));
  s += v;
}

int value_type_of(Dtype t) {
  for (uint32_t v = 0; v <= 12; ++v) {
    if (auto d = value_dtype(v); d && *d == t) return static_cast<int>(v);
  }
  return -1;
}

int tensor_type_of(Dtype t) {
  for (uint32_t v = 0; v <= 30; ++v) {
    if (auto d = tensor_dtype(v); d && *d == t) return static_cast<int>(v);
  }
  return -1;
}

void put_value(std::string& s, const std::string& key, const GGUFMetaData& value) {
  const char* op = "save_gguf";
  if (auto* str = std::get_if<std::string>(&value)) {
    put_le(s, kString);
    put_string(s, *str);
  } else if (auto* list = std::get_if<std::vector<std::string>>(&value)) {
    put_le(s, kArray);
    put_le(s, kString);
    put_le(s, static_cast<uint64_t>(list->size()));
    for (auto& v : *list) put_string(s, v);
  } else if (auto* a = std::get_if<array>(&value)) {
    if (a->ndim() > 1) {
      fail(op, "metadata " + repr(key) + " must be a scalar or 1-D array, got shape " +
                   shape_str(a->shape()));
    }
    int type = value_type_of(a->dtype());
    if (type < 0) {
      fail(op, "metadata " + repr(key) + " has dtype " + dtype_name(a->dtype()) +
                   ", which GGUF metadata cannot hold");
    }
    if (a->ndim() == 1) {
      put_le(s, kArray);
      put_le(s, static_cast<uint32_t>(type));
      put_le(s, static_cast<uint64_t>(a->size()));
    } else {
      put_le(s, static_cast<uint32_t>(type));
    }
    array data = detail::host_data(*a);
    if (data.nbytes()) s.append(detail::bytes_of(data), data.nbytes());
  } else {
    fail(op, "metadata " + repr(key) + " has no value");
  }
}

uint64_t alignment_of(const Entries<GGUFMetaData>& meta) {
  for (auto& [key, value] : meta) {
    if (key != kAlignmentKey) continue;
    auto* a = std::get_if<array>(&value);
    uint32_t v = a && a->dtype() == uint32 && a->ndim() == 0 ? a->item<uint32_t>() : 0;
    if (v == 0 || (v & (v - 1))) {
      fail("save_gguf", std::string(kAlignmentKey) +
                            " must be a uint32 scalar and a power of two, got " +
                            (a ? "an array of dtype " + dtype_name(a->dtype()) + " and shape " +
                                     shape_str(a->shape()) +
                                     (a->ndim() == 0 && a->dtype() == uint32
                                          ? " holding " + std::to_string(v)
                                          : "")
                               : std::string("a string")));
    }
    return v;
  }
  return kAlignment;
}

}  // namespace

int gguf_tensor_type(Dtype t) { return tensor_type_of(t); }
int gguf_value_type(Dtype t) { return value_type_of(t); }

std::pair<Entries<array>, Entries<GGUFMetaData>> read_gguf(const Reader& in) {
  Bytes b = detail::bytes_of(in, "gguf");
  Cursor c(b);
  auto magic = c.take(4, "the magic \"GGUF\"");
  if (magic != std::string_view(kMagic, 4)) {
    std::string shown;
    for (char ch : magic) {
      static const char hex[] = "0123456789abcdef";
      auto u = static_cast<unsigned char>(ch);
      shown += u >= 32 && u < 127 ? std::string(1, ch) : std::string("\\x") + hex[u >> 4] + hex[u & 15];
    }
    fail("load", "not a gguf file: " + b.label + " starts with '" + shown + "', not 'GGUF'");
  }
  uint32_t version = c.get<uint32_t>("the version");
  if (version != 2 && version != 3) {
    fail("load", "gguf version " + std::to_string(version) + " of " + b.label +
                     " is not supported (2 and 3 are; big-endian files are not)");
  }
  uint64_t n_tensors = c.get<uint64_t>("the tensor count");
  uint64_t n_meta = c.get<uint64_t>("the metadata count");
  std::pair<Entries<array>, Entries<GGUFMetaData>> out;
  auto& meta = out.second;
  std::set<std::string> keys;
  for (uint64_t i = 0; i < n_meta; ++i) {
    std::string key = read_string(c, "metadata key " + std::to_string(i));
    auto value = read_value(c, b, key);
    if (!keys.insert(key).second) {
      fail("load", "gguf metadata " + repr(key) + " of " + b.label + " appears twice");
    }
    meta.emplace_back(std::move(key), std::move(value));
  }
  std::vector<TensorInfo> infos;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    t.name = read_string(c, "the name of tensor " + std::to_string(i));
    std::string what = "the tensor info of " + repr(t.name);
    uint32_t n_dims = c.get<uint32_t>(what);
    c.need(n_dims, 8, what);
    for (uint32_t d = 0; d < n_dims; ++d) {
      t.shape.insert(t.shape.begin(),
                     detail::dimension(c.get<uint64_t>(what),
                                       "gguf tensor " + repr(t.name) + " of " + b.label));
    }
    t.type = c.get<uint32_t>(what);
    t.offset = c.get<uint64_t>(what);
    infos.push_back(std::move(t));
  }
  uint64_t alignment = kAlignment;
  for (auto& [key, value] : meta) {
    if (key != kAlignmentKey) continue;
    auto* a = std::get_if<array>(&value);
    bool ok = a && a->ndim() == 0 && is_integer(a->dtype());
    int64_t v = ok ? a->item<int64_t>() : 0;
    if (!ok || v <= 0 || v > (int64_t{1} << 32)) {
      fail("load", "gguf " + std::string(kAlignmentKey) + " of " + b.label +
                       " must be a positive integer scalar");
    }
    alignment = static_cast<uint64_t>(v);
  }
  uint64_t data = (c.pos() + alignment - 1) / alignment * alignment;
  std::set<std::string> names;
  for (auto& t : infos) read_tensor(b, t, data, out.first, names);
  return out;
}

void write_gguf(Writer& out, const Entries<array>& arrays, const Entries<GGUFMetaData>& meta) {
  const char* op = "save_gguf";
  uint64_t alignment = alignment_of(meta);
  std::string head(kMagic, 4);
  put_le(head, kVersion);
  put_le(head, static_cast<uint64_t>(arrays.size()));
  put_le(head, static_cast<uint64_t>(meta.size()));
  std::set<std::string> keys;
  for (auto& [key, value] : meta) {
    if (!keys.insert(key).second) fail(op, "two metadata entries are named " + repr(key));
    put_string(head, key);
    put_value(head, key, value);
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  for (auto& [name, a] : arrays) {
    if (!names.insert(name).second) fail(op, "two tensors are named " + repr(name));
    int type = tensor_type_of(a.dtype());
    if (type < 0) {
      fail(op, "tensor " + repr(name) + " has dtype " + dtype_name(a.dtype()) +
                   ", which has no GGUF type (float32, float16, bfloat16, float64, int8, int16, "
                   "int32 and int64 have)");
    }
    put_string(head, name);
    put_le(head, static_cast<uint32_t>(a.ndim()));
    for (size_t d = a.ndim(); d-- > 0;) put_le(head, static_cast<uint64_t>(a.shape()[d]));
    put_le(head, static_cast<uint32_t>(type));
    put_le(head, offset);
    offset += (a.nbytes() + alignment - 1) / alignment * alignment;
  }
  head.append((alignment - head.size() % alignment) % alignment, '\0');
  out.write(head.data(), head.size());
  const std::string zeros(alignment, '\0');
  for (auto& [name, a] : arrays) {
    array data = detail::host_data(a);
    if (data.nbytes()) out.write(detail::bytes_of(data), data.nbytes());
    out.write(zeros.data(), (alignment - data.nbytes() % alignment) % alignment);
  }
  out.finish();
}

}  // namespace io

GGUFLoad load_gguf(std::shared_ptr<io::Reader> in, StreamOrDevice s) {
  auto [arrays, meta] = io::read_gguf(*in);
  return {io::detail::to_map(std::move(arrays)), io::detail::to_map(std::move(meta))};
}

GGUFLoad load_gguf(const std::string& file, StreamOrDevice s) {
  return load_gguf(std::make_shared<io::FileReader>(file), s);
}

void save_gguf(std::shared_ptr<io::Writer> out, std::unordered_map<std::string, array> arrays,
               std::unordered_map<std::string, GGUFMetaData> meta) {
  io::write_gguf(*out, io::detail::sorted(arrays), io::detail::sorted(meta));
}

void save_gguf(std::string file, std::unordered_map<std::string, array> arrays,
               std::unordered_map<std::string, GGUFMetaData> meta) {
  save_gguf(std::make_shared<io::FileWriter>(io::with_extension(std::move(file), ".gguf")),
            std::move(arrays), std::move(meta));
}

}  // namespace tessera
