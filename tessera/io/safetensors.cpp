// .safetensors files.
//
// Note [The safetensors layout]
// A uint64 N (little-endian), N bytes of JSON, then the data. The JSON is an
// object: "__metadata__" maps to an object of strings (optional), every other
// key names a tensor:
//   {"dtype": "F32", "shape": [3, 4], "data_offsets": [begin, end]}
// with [begin, end) the tensor's bytes, row-major and little-endian, counted
// from the start of the data. Written here: the header padded with spaces to
// a multiple of 8 bytes, the tensors' data packed without gaps in the order
// of decreasing element size (so every tensor is aligned for its dtype when
// the file is mapped), the header listing them in the order given.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>
#include <set>

#include "tessera/io/bytes.h"
#include "tessera/ops/utils.h"

namespace tessera {

namespace io {

namespace {

using detail::fail;
using detail::repr;
using json = nlohmann::ordered_json;

constexpr const char* kMetadata = "__metadata__";

// Every dtype has a code ("C64" is MLX's complex64).
const char* code_of(Dtype t) {
  switch (t.val) {
    case Dtype::Val::bool_: return "BOOL";
    case Dtype::Val::uint8: return "U8";
    case Dtype::Val::uint16: return "U16";
    case Dtype::Val::uint32: return "U32";
    case Dtype::Val::uint64: return "U64";
    case Dtype::Val::int8: return "I8";
    case Dtype::Val::int16: return "I16";
    case Dtype::Val::int32: return "I32";
    case Dtype::Val::int64: return "I64";
    case Dtype::Val::float16: return "F16";
    case Dtype::Val::bfloat16: return "BF16";
    case Dtype::Val::float32: return "F32";
    case Dtype::Val::float64: return "F64";
    case Dtype::Val::complex64: return "C64";
  }
  return "";
}

Dtype dtype_of_code(const std::string& code, const std::string& name, const detail::Bytes& b) {
  for (Dtype t : all_dtypes) {
    if (code == code_of(t)) return t;
  }
  fail("load", "tensor " + repr(name) + " of " + b.label + " has safetensors dtype " +
                   repr(code) +
                   ", which is not supported (BOOL, U8-U64, I8-I64, F16, BF16, F32, F64, C64 are)");
}

uint64_t unsigned_field(const json& v, const std::string& what, const detail::Bytes& b) {
  if (!v.is_number_unsigned()) {
    fail("load", "the safetensors header of " + b.label + ": " + what +
                     " must be a non-negative integer, not " + v.dump());
  }
  return v.get<uint64_t>();
}

const json& member(const json& info, const char* key, const std::string& name,
                   const detail::Bytes& b) {
  auto it = info.find(key);
  if (it == info.end()) {
    fail("load", "the safetensors header of " + b.label + " gives tensor " + repr(name) +
                     " no \"" + key + "\"");
  }
  return *it;
}

}  // namespace

std::pair<Entries<array>, Entries<std::string>> read_safetensors(const Reader& in) {
  auto b = detail::bytes_of(in, "safetensors");
  detail::Cursor c(b);
  uint64_t n = c.get<uint64_t>("the header length");
  c.need(n, 1, "the JSON header");
  json header;
  try {
    header = json::parse(b.data + 8, b.data + 8 + n);
  } catch (const json::exception& e) {
    // The parser quotes the offending bytes, which need not be UTF-8.
    std::string why = e.what();
    for (char& ch : why) {
      if (static_cast<unsigned char>(ch) >= 0x80) ch = '?';
    }
    fail("load", "the safetensors header of " + b.label + " is not valid JSON: " + why);
  }
  if (!header.is_object()) {
    fail("load", "the safetensors header of " + b.label + " is not a JSON object");
  }
  const size_t start = 8 + n, data_size = b.size - start;
  std::pair<Entries<array>, Entries<std::string>> out;
  for (auto& [name, info] : header.items()) {
    if (name == kMetadata) {
      if (!info.is_object()) fail("load", "the __metadata__ of " + b.label + " is not an object");
      for (auto& [k, v] : info.items()) {
        if (!v.is_string()) {
          fail("load", "the __metadata__ of " + b.label + " maps " + repr(k) +
                           " to " + v.dump() + ", not a string");
        }
        out.second.emplace_back(k, v.get<std::string>());
      }
      continue;
    }
    if (!info.is_object()) {
      fail("load", "the safetensors header of " + b.label + " describes tensor " + repr(name) +
                       " with " + info.dump() + ", not an object");
    }
    auto& code = member(info, "dtype", name, b);
    if (!code.is_string()) fail("load", "tensor " + repr(name) + " of " + b.label + " has dtype " + code.dump());
    Dtype dtype = dtype_of_code(code.get<std::string>(), name, b);
    auto& dims = member(info, "shape", name, b);
    auto& offsets = member(info, "data_offsets", name, b);
    if (!dims.is_array() || !offsets.is_array() || offsets.size() != 2) {
      fail("load", "tensor " + repr(name) + " of " + b.label +
                       " needs a list \"shape\" and a pair \"data_offsets\", not " + info.dump());
    }
    Shape shape;
    for (auto& d : dims) {
      shape.push_back(detail::dimension(unsigned_field(d, "the shape of " + repr(name), b),
                                        "tensor " + repr(name) + " of " + b.label));
    }
    size_t count = detail::element_count(shape, "tensor " + repr(name) + " of " + b.label);
    uint64_t begin = unsigned_field(offsets[0], "the data_offsets of " + repr(name), b);
    uint64_t end = unsigned_field(offsets[1], "the data_offsets of " + repr(name), b);
    if (begin > end || end > data_size) {
      fail("load", b.label + ": header of " + std::to_string(n) + " bytes claims tensor " +
                       repr(name) + " at bytes " + std::to_string(begin) + ".." +
                       std::to_string(end) + " of the data, which has " +
                       std::to_string(data_size) + " bytes (the file " + std::to_string(b.size) +
                       ")");
    }
    if (count > (end - begin) / dtype.size || count * dtype.size != end - begin) {
      fail("load", b.label + ": tensor " + repr(name) + " of shape " + shape_str(shape) +
                       " and dtype " + code.get<std::string>() + " spans " +
                       std::to_string(end - begin) + " bytes, not " +
                       (count > (end - begin) / dtype.size
                            ? std::string("its ") + std::to_string(count) + " elements' size"
                            : std::to_string(count * dtype.size)));
    }
    out.first.emplace_back(name, detail::array_at(b, start + begin, std::move(shape), dtype));
  }
  return out;
}

void write_safetensors(Writer& out, const Entries<array>& arrays,
                       const Entries<std::string>& metadata) {
  const char* op = "save_safetensors";
  json header = json::object();
  if (!metadata.empty()) {
    json& meta = header[kMetadata] = json::object();
    for (auto& [k, v] : metadata) meta[k] = v;
  }
  std::set<std::string> names;
  for (auto& [name, a] : arrays) {
    if (name == kMetadata) fail(op, "a tensor cannot be named __metadata__");
    if (!names.insert(name).second) fail(op, "two tensors are named " + repr(name));
  }
  // The data of the widest elements first: Note [The safetensors layout].
  std::vector<size_t> order(arrays.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) {
    return arrays[i].second.itemsize() > arrays[j].second.itemsize();
  });
  std::vector<uint64_t> begin(arrays.size());
  uint64_t offset = 0;
  for (size_t i : order) {
    begin[i] = offset;
    offset += arrays[i].second.nbytes();
  }
  for (size_t i = 0; i < arrays.size(); ++i) {
    auto& a = arrays[i].second;
    header[arrays[i].first] = {{"dtype", code_of(a.dtype())},
                               {"shape", a.shape()},
                               {"data_offsets", {begin[i], begin[i] + a.nbytes()}}};
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {
    fail(op, std::string("a name or metadata string is not valid UTF-8: ") + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string head;
  detail::put_le(head, static_cast<uint64_t>(text.size()));
  out.write(head.data(), head.size());
  out.write(text.data(), text.size());
  for (size_t i : order) {
    array data = detail::host_data(arrays[i].second);
    if (data.nbytes()) out.write(detail::bytes_of(data), data.nbytes());
  }
  out.finish();
}

}  // namespace io

SafetensorsLoad load_safetensors(std::shared_ptr<io::Reader> in, StreamOrDevice s) {
  auto [arrays, metadata] = io::read_safetensors(*in);
  return {io::detail::to_map(std::move(arrays)), io::detail::to_map(std::move(metadata))};
}

SafetensorsLoad load_safetensors(const std::string& file, StreamOrDevice s) {
  return load_safetensors(std::make_shared<io::FileReader>(file), s);
}

void save_safetensors(std::shared_ptr<io::Writer> out,
                      std::unordered_map<std::string, array> arrays,
                      std::unordered_map<std::string, std::string> metadata) {
  io::write_safetensors(*out, io::detail::sorted(arrays), io::detail::sorted(metadata));
}

void save_safetensors(std::string file, std::unordered_map<std::string, array> arrays,
                      std::unordered_map<std::string, std::string> metadata) {
  save_safetensors(
      std::make_shared<io::FileWriter>(io::with_extension(std::move(file), ".safetensors")),
      std::move(arrays), std::move(metadata));
}

}  // namespace tessera
