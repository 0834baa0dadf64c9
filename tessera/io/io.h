// Saving and loading arrays (MLX's mlx/io.h): NumPy's .npy and .npz,
// safetensors and GGUF.
//
//   save("w", a);                                       // writes w.npy
//   array b = load("w.npy");
//   savez("z", {{"a", a}, {"b", b}}, /*compressed=*/true);   // z.npz
//   auto z = load_npz("z.npz");                         // name -> array
//   save_safetensors("m", {{"w", a}}, {{"format", "mlx"}});
//   auto [arrays, metadata] = load_safetensors("m.safetensors");
//   auto [weights, meta] = load_gguf("model.gguf");
//
// Saving to a path appends the format's extension when the path lacks it and
// replaces the file only once it is complete (Note [Saving in place] in
// io/file.h). Loading from a path maps the file (Note [Mapped files]): arrays
// whose bytes lie in it in their final form use the mapping without a copy;
// the others (byte-swapped, misaligned, compressed, GGUF's quantized blocks)
// are converted once. Loaded arrays are evaluated; `s` orders the views that
// Fortran-ordered .npy data loads as.
//
// Errors: a corrupt or truncated file, a dtype a format cannot hold or a
// malformed argument raise std::invalid_argument naming the file and what is
// wrong; a file that cannot be opened, created or written raises
// std::runtime_error.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"
#include "tessera/io/file.h"

namespace tessera {

using SafetensorsLoad = std::pair<std::unordered_map<std::string, array>,
                                  std::unordered_map<std::string, std::string>>;
// A GGUF metadata value: a scalar (0-d array), a 1-D array, a string or a list
// of strings.
using GGUFMetaData = std::variant<std::monostate, array, std::string, std::vector<std::string>>;
using GGUFLoad = std::pair<std::unordered_map<std::string, array>,
                           std::unordered_map<std::string, GGUFMetaData>>;

// .npy: one array, any dtype but bfloat16 (NumPy has none).
void save(std::shared_ptr<io::Writer> out, array a);
void save(std::string file, array a);
array load(std::shared_ptr<io::Reader> in, StreamOrDevice s = {});
array load(std::string file, StreamOrDevice s = {});

// .npz: a zip archive of .npy files named "<name>.npy", stored or deflated.
void savez(std::shared_ptr<io::Writer> out, const std::unordered_map<std::string, array>& arrays,
           bool compressed = false);
void savez(std::string file, const std::unordered_map<std::string, array>& arrays,
           bool compressed = false);
std::unordered_map<std::string, array> load_npz(std::shared_ptr<io::Reader> in,
                                                StreamOrDevice s = {});
std::unordered_map<std::string, array> load_npz(std::string file, StreamOrDevice s = {});

// .safetensors: a JSON header (with optional string metadata) and the raw data.
SafetensorsLoad load_safetensors(std::shared_ptr<io::Reader> in, StreamOrDevice s = {});
SafetensorsLoad load_safetensors(const std::string& file, StreamOrDevice s = {});
void save_safetensors(std::shared_ptr<io::Writer> out,
                      std::unordered_map<std::string, array> arrays,
                      std::unordered_map<std::string, std::string> metadata = {});
void save_safetensors(std::string file, std::unordered_map<std::string, array> arrays,
                      std::unordered_map<std::string, std::string> metadata = {});

// .gguf (versions 2 and 3 read, 3 written). Q4_0, Q4_1 and Q8_0 tensors load
// as affine-quantized triples <base>.weight (uint32), <base>.scales and
// <base>.biases (float16, group size 32), where <base> is the tensor's name
// without ".weight"; Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and Q8_K load
// dequantized to float16; other ggml types are refused by name.
GGUFLoad load_gguf(std::shared_ptr<io::Reader> in, StreamOrDevice s = {});
GGUFLoad load_gguf(const std::string& file, StreamOrDevice s = {});
void save_gguf(std::shared_ptr<io::Writer> out, std::unordered_map<std::string, array> arrays,
               std::unordered_map<std::string, GGUFMetaData> meta = {});
void save_gguf(std::string file, std::unordered_map<std::string, array> arrays,
               std::unordered_map<std::string, GGUFMetaData> meta = {});

namespace io {

// The formats with their entries in file order, as a Python dict keeps them.
// The map-based functions above save their entries sorted by name.
template <typename T>
using Entries = std::vector<std::pair<std::string, T>>;

void write_npy(Writer& out, const array& a);
Entries<array> read_npz(const Reader& in, StreamOrDevice s = {});
void write_npz(Writer& out, const Entries<array>& arrays, bool compressed);
std::pair<Entries<array>, Entries<std::string>> read_safetensors(const Reader& in);
void write_safetensors(Writer& out, const Entries<array>& arrays,
                       const Entries<std::string>& metadata);
std::pair<Entries<array>, Entries<GGUFMetaData>> read_gguf(const Reader& in);
void write_gguf(Writer& out, const Entries<array>& arrays, const Entries<GGUFMetaData>& meta);

// The ggml tensor type and the GGUF metadata value type of a dtype, or -1
// where GGUF has none.
int gguf_tensor_type(Dtype t);
int gguf_value_type(Dtype t);

// `file` with `extension` (".npy") appended unless it already ends with it.
std::string with_extension(std::string file, const std::string& extension);

}  // namespace io
}  // namespace tessera
