// File I/O: round trips of every dtype, shape and layout through .npy, .npz,
// .safetensors and .gguf; files written here byte for byte (a .npy header, zip
// archives with stored, deflated and ZIP64 members, safetensors headers, GGUF
// files with Q4_0, Q4_1 and Q8_0 blocks dequantized by a loop) read back; the
// exact bytes that saving writes; every truncation and corruption refused with
// std::invalid_argument naming the file; failed saves leaving the existing
// file untouched.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "harness.h"

using namespace tessera;
using harness::from_doubles;
using harness::Layout;
using harness::random_values;
using harness::with_layout;

namespace fs = std::filesystem;

namespace {

// ---- helpers ------------------------------------------------------------------

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "tessera-io-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (fs::path(path_) / name).string(); }
  // Names of the files in the directory, sorted.
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (auto& e : fs::directory_iterator(path_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::string path_;
};

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

struct MemoryWriter : io::Writer {
  std::string bytes;
  int finished = 0;
  std::string label() const override { return "<memory>"; }
  void write(const char* p, size_t n) override { bytes.append(p, n); }
  void finish() override { ++finished; }
};

std::shared_ptr<io::Reader> reader(std::string bytes, std::string label = "hand.bin") {
  return std::make_shared<io::BytesReader>(std::move(bytes), std::move(label));
}

template <typename T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// CRC-32 (IEEE), one bit at a time.
uint32_t crc32_bitwise(const std::string& s) {
  uint32_t c = 0xffffffffu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

// Values of `dtype` for `shape` (constant along axis 0 for the broadcast layout,
// which repeats one row).
std::vector<double> values_for(const Shape& shape, Dtype dtype, Layout layout, uint64_t seed) {
  auto v = random_values(shape_size(shape), dtype, -60, 60, seed);
  if (layout == Layout::broadcast && !shape.empty() && shape[0] > 0) {
    size_t row = v.size() / shape[0];
    for (size_t i = row; i < v.size(); ++i) v[i] = v[i % row];
  }
  return v;
}

void expect_same(const array& got, const array& want, const std::vector<double>& values,
                 const std::string& ctx) {
  ASSERT_EQ(got.dtype(), want.dtype()) << ctx;
  ASSERT_EQ(got.shape(), want.shape()) << ctx;
  EXPECT_EQ(harness::to_doubles(got), values) << ctx;
  EXPECT_TRUE(array_equal(got, want).item<bool>()) << ctx;
}

const std::vector<Shape> kShapes = {{}, {0}, {7}, {3, 4}, {2, 0, 3}, {2, 3, 5}};

std::vector<Dtype> npy_dtypes() {
  std::vector<Dtype> out;
  for (Dtype t : all_dtypes) {
    if (t != bfloat16) out.push_back(t);
  }
  return out;
}
const std::vector<Dtype> kGGUFDtypes = {float32, float16, bfloat16, float64,
                                        int8,    int16,   int32,    int64};

// Runs `check` for every dtype, shape and layout.
template <typename F>
void for_each_case(const std::vector<Dtype>& dtypes, F&& check) {
  uint64_t seed = 1;
  for (Dtype t : dtypes) {
    for (auto& shape : kShapes) {
      for (Layout layout : harness::all_layouts()) {
        if (layout != Layout::contiguous && shape.size() < 2) continue;
        auto v = values_for(shape, t, layout, seed++);
        array a = with_layout(v, shape, t, layout);
        std::ostringstream ctx;
        ctx << dtype_name(t) << " " << shape_str(shape) << " " << harness::layout_name(layout);
        check(a, v, ctx.str());
      }
    }
  }
}

// Expects f to throw std::invalid_argument whose message has every one of `parts`.
template <typename F>
void expect_invalid(F&& f, std::vector<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one naming " << parts[0];
  } catch (const std::invalid_argument& e) {
    for (auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

// ---- .npy ---------------------------------------------------------------------

TEST(NpyTest, round_trip_of_every_dtype_shape_and_layout) {
  TempDir dir;
  for_each_case(npy_dtypes(), [&](const array& a, const std::vector<double>& v,
                                  const std::string& ctx) {
    save(dir / "a", a);  // ".npy" appended
    expect_same(load(dir / "a.npy"), a, v, ctx);
  });
  EXPECT_EQ(dir.files(), std::vector<std::string>{"a.npy"});
}

TEST(NpyTest, complex_values_round_trip) {
  array a = add(from_doubles({1.5, -2, 0}, {3}, complex64),
                multiply(from_doubles({0.25, 3, -1}, {3}, complex64), array(complex64_t(0, 1))));
  MemoryWriter out;
  save(std::shared_ptr<io::Writer>(&out, [](io::Writer*) {}), a);
  array b = load(reader(out.bytes, "c.npy"));
  EXPECT_EQ(harness::to_complex(b), harness::to_complex(a));
}

// The header as NumPy writes it: version 1.0, padded with spaces so that the
// data starts at a multiple of 64 bytes.
std::string npy_header(const std::string& dict) {
  std::string h = std::string("\x93NUMPY\x01\x00", 8);
  std::string text = dict;
  text.append((10 + text.size() + 1 + 63) / 64 * 64 - 10 - text.size() - 1, ' ');
  text += '\n';
  put(h, static_cast<uint16_t>(text.size()));
  return h + text;
}

TEST(NpyTest, save_writes_numpys_bytes) {
  array a = from_doubles({1, 2, 3, 4, 5, 6}, {2, 3}, int32);
  MemoryWriter out;
  save(std::shared_ptr<io::Writer>(&out, [](io::Writer*) {}), a);
  std::string want = npy_header("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }");
  for (int32_t i = 1; i <= 6; ++i) put(want, i);
  EXPECT_EQ(out.bytes, want);
  EXPECT_EQ(out.finished, 1);
  // A transposed view is saved in Fortran order without a copy of its layout.
  MemoryWriter t;
  save(std::shared_ptr<io::Writer>(&t, [](io::Writer*) {}), transpose(a));
  want = npy_header("{'descr': '<i4', 'fortran_order': True, 'shape': (3, 2), }");
  for (int32_t i = 1; i <= 6; ++i) put(want, i);
  EXPECT_EQ(t.bytes, want);
  // 0-d and 1-D shapes are Python tuples.
  MemoryWriter s;
  save(std::shared_ptr<io::Writer>(&s, [](io::Writer*) {}), array(true));
  EXPECT_EQ(s.bytes, npy_header("{'descr': '|b1', 'fortran_order': False, 'shape': (), }") + '\1');
  MemoryWriter v;
  save(std::shared_ptr<io::Writer>(&v, [](io::Writer*) {}), from_doubles({2}, {1}, uint8));
  EXPECT_EQ(v.bytes, npy_header("{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }") + '\2');
}

TEST(NpyTest, hand_written_files_read_back) {
  // Little-endian float32 with the keys in another order and double quotes.
  std::string f = npy_header("{\"shape\": (2, 2), \"fortran_order\": False, \"descr\": \"<f4\"}");
  for (float x : {1.5f, -2.f, 0.25f, 8.f}) put(f, x);
  harness::expect_values(load(reader(f)), {1.5, -2, 0.25, 8}, "float32");
  // Big-endian int16, and big-endian complex64 (each float swapped on its own).
  std::string be = npy_header("{'descr': '>i2', 'fortran_order': False, 'shape': (3,), }");
  be += std::string("\x01\x02\xff\xfe\x00\x07", 6);
  harness::expect_values(load(reader(be)), {0x0102, -2, 7}, "big-endian int16");
  std::string bc = npy_header("{'descr': '>c8', 'fortran_order': False, 'shape': (1,), }");
  bc += std::string("\x3f\xc0\x00\x00\xc0\x40\x00\x00", 8);  // 1.5 - 3j
  EXPECT_EQ(harness::to_complex(load(reader(bc)))[0], std::complex<double>(1.5, -3));
  // Fortran order: the data is column-major.
  std::string fo = npy_header("{'descr': '<i8', 'fortran_order': True, 'shape': (2, 3), }");
  for (int64_t x : {1, 4, 2, 5, 3, 6}) put(fo, x);
  array a = load(reader(fo));
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(harness::to_doubles(a), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  // Version 2.0 (a 4-byte header length), bfloat16 as MLX writes it ('<V2').
  std::string v2 = std::string("\x93NUMPY\x02\x00", 8);
  std::string dict = "{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }";
  put(v2, static_cast<uint32_t>(dict.size()));
  v2 += dict;
  put(v2, uint16_t{0x3fc0});  // 1.5
  put(v2, uint16_t{0xc100});  // -8
  array bf = load(reader(v2));
  EXPECT_EQ(bf.dtype(), bfloat16);
  EXPECT_EQ(harness::to_doubles(bf), (std::vector<double>{1.5, -8}));
}

TEST(NpyTest, bfloat16_cannot_be_saved) {
  MemoryWriter out;
  expect_invalid([&] { save(std::shared_ptr<io::Writer>(&out, [](io::Writer*) {}),
                            zeros({2}, bfloat16)); },
                 {"[save]", "bfloat16"});
  EXPECT_TRUE(out.bytes.empty());
}

TEST(NpyTest, every_truncation_is_refused_naming_the_file) {
  MemoryWriter out;
  save(std::shared_ptr<io::Writer>(&out, [](io::Writer*) {}), from_doubles({1, 2, 3}, {3}, float64));
  for (size_t n = 0; n < out.bytes.size(); ++n) {
    expect_invalid([&] { load(reader(out.bytes.substr(0, n), "cut.npy")); }, {"[load]", "cut.npy"});
  }
}

TEST(NpyTest, corrupt_headers_are_refused) {
  auto with = [](const std::string& dict) { return npy_header(dict) + std::string(64, '\0'); };
  expect_invalid([&] { load(reader("GARBAGE-NOT-NPY", "x.npy")); }, {"not a .npy file", "x.npy"});
  expect_invalid([&] { load(reader(with("{'descr': '<U4', 'fortran_order': False, 'shape': (2,), }"),
                                   "u.npy")); },
                 {"u.npy", "'<U4'"});
  expect_invalid([&] { load(reader(with("{'descr': [('a', '<f4')], 'fortran_order': False, "
                                        "'shape': (2,), }"), "s.npy")); },
                 {"s.npy", "structured"});
  expect_invalid([&] { load(reader(with("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }"),
                                   "m.npy")); },
                 {"m.npy", "malformed"});
  expect_invalid([&] { load(reader(with("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }"),
                                   "n.npy")); },
                 {"n.npy", "malformed"});
  expect_invalid([&] { load(reader(with("{'descr': '<f4', 'fortran_order': False, "
                                        "'shape': (4000000000,), }"), "big.npy")); },
                 {"big.npy", "4000000000"});
  expect_invalid([&] { load(reader(with("{'descr': '<f4', 'shape': (2,), }"), "k.npy")); },
                 {"k.npy", "required"});
  std::string v9 = with("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }");
  v9[6] = 9;
  expect_invalid([&] { load(reader(v9, "v.npy")); }, {"version 9", "v.npy"});
  // A shape whose data the file does not hold.
  expect_invalid([&] { load(reader(npy_header("{'descr': '<f8', 'fortran_order': False, "
                                              "'shape': (100,), }"), "short.npy")); },
                 {"truncated", "short.npy", "800 bytes"});
}

// ---- .npz ---------------------------------------------------------------------

TEST(NpzTest, round_trip_stored_and_deflated) {
  TempDir dir;
  for (bool compressed : {false, true}) {
    std::unordered_map<std::string, array> arrays;
    std::unordered_map<std::string, std::pair<array, std::vector<double>>> want;
    int i = 0;
    for_each_case(npy_dtypes(), [&](const array& a, const std::vector<double>& v,
                                    const std::string& ctx) {
      std::string name = "a" + std::to_string(i++);
      arrays.insert({name, a});
      want.insert({name, {a, v}});
    });
    savez(dir / "z", arrays, compressed);  // ".npz" appended
    auto got = load_npz(dir / "z.npz");
    ASSERT_EQ(got.size(), want.size());
    for (auto& [name, w] : want) expect_same(got.at(name), w.first, w.second, name);
  }
  EXPECT_EQ(dir.files(), std::vector<std::string>{"z.npz"});
}

TEST(NpzTest, compression_shrinks_zeros_and_keeps_file_order) {
  io::Entries<array> arrays = {{"z", zeros({256, 256})}, {"a", ones({3}, int8)}};
  MemoryWriter stored, deflated;
  io::write_npz(stored, arrays, false);
  io::write_npz(deflated, arrays, true);
  EXPECT_LT(deflated.bytes.size() * 20, stored.bytes.size());
  for (auto* w : {&stored, &deflated}) {
    auto got = io::read_npz(io::BytesReader(w->bytes, "o.npz"));
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].first, "z");
    EXPECT_EQ(got[1].first, "a");
    EXPECT_TRUE(array_equal(got[1].second, arrays[1].second).item<bool>());
  }
}

struct ZipMember {
  std::string name, data;
  uint16_t method;  // 0 stored, 8 deflated (as one deflate "stored" block), other: refused
  bool zip64;       // sizes and offset in ZIP64 extra fields, a ZIP64 end record
  uint16_t flags = 0;
};

// An archive built field by field (Note [The zip layout] in io/npz.cpp).
std::string build_zip(const std::vector<ZipMember>& members) {
  std::string zip, dir;
  bool any64 = false;
  for (auto& m : members) {
    std::string body = m.data;
    if (m.method == 8) {  // BFINAL=1, BTYPE=00: the bytes as they are
      body = std::string(1, '\x01');
      put(body, static_cast<uint16_t>(m.data.size()));
      put(body, static_cast<uint16_t>(~m.data.size()));
      body += m.data;
    }
    uint32_t crc = crc32_bitwise(m.data);
    uint64_t offset = zip.size();
    std::string extra;
    if (m.zip64) {
      put(extra, uint16_t{1});
      put(extra, uint16_t{24});
      put(extra, uint64_t{m.data.size()});
      put(extra, uint64_t{body.size()});
      put(extra, offset);
    }
    auto sizes = [&](std::string& s) {
      put(s, crc);
      put(s, m.zip64 ? 0xffffffffu : uint32_t(body.size()));
      put(s, m.zip64 ? 0xffffffffu : uint32_t(m.data.size()));
    };
    put(zip, uint32_t{0x04034b50});
    put(zip, uint16_t{45});
    put(zip, m.flags);
    put(zip, m.method);
    put(zip, uint32_t{0});  // time, date
    sizes(zip);
    put(zip, uint16_t(m.name.size()));
    put(zip, uint16_t(extra.size()));
    zip += m.name + extra + body;
    put(dir, uint32_t{0x02014b50});
    put(dir, uint16_t{45});
    put(dir, uint16_t{45});
    put(dir, m.flags);
    put(dir, m.method);
    put(dir, uint32_t{0});
    sizes(dir);
    put(dir, uint16_t(m.name.size()));
    put(dir, uint16_t(extra.size()));
    put(dir, uint16_t{0});
    put(dir, uint16_t{0});
    put(dir, uint16_t{0});
    put(dir, uint32_t{0});
    put(dir, m.zip64 ? 0xffffffffu : uint32_t(offset));
    dir += m.name + extra;
    any64 = any64 || m.zip64;
  }
  uint64_t dir_at = zip.size();
  zip += dir;
  if (any64) {
    uint64_t end64_at = zip.size();
    put(zip, uint32_t{0x06064b50});
    put(zip, uint64_t{44});
    put(zip, uint16_t{45});
    put(zip, uint16_t{45});
    put(zip, uint64_t{0});
    put(zip, uint64_t{members.size()});
    put(zip, uint64_t{members.size()});
    put(zip, uint64_t{dir.size()});
    put(zip, dir_at);
    put(zip, uint32_t{0x07064b50});
    put(zip, uint32_t{0});
    put(zip, end64_at);
    put(zip, uint32_t{1});
  }
  put(zip, uint32_t{0x06054b50});
  put(zip, uint32_t{0});
  put(zip, any64 ? uint16_t{0xffff} : uint16_t(members.size()));
  put(zip, any64 ? uint16_t{0xffff} : uint16_t(members.size()));
  put(zip, any64 ? 0xffffffffu : uint32_t(dir.size()));
  put(zip, any64 ? 0xffffffffu : uint32_t(dir_at));
  put(zip, uint16_t{0});
  return zip;
}

std::string npy_of_int16(std::vector<int16_t> v) {
  std::string f = npy_header("{'descr': '<i2', 'fortran_order': False, 'shape': (" +
                             std::to_string(v.size()) + ",), }");
  for (auto x : v) put(f, x);
  return f;
}

TEST(NpzTest, hand_built_archives_read_back) {
  for (bool zip64 : {false, true}) {
    std::string zip = build_zip({{"a.npy", npy_of_int16({1, -2, 3}), 0, zip64},
                                 {"dir/b.npy", npy_of_int16({7}), 8, zip64},
                                 {"c", npy_of_int16({}), 8, zip64}});
    auto got = io::read_npz(io::BytesReader(zip, "h.npz"));
    ASSERT_EQ(got.size(), 3u) << zip64;
    EXPECT_EQ(got[0].first, "a");
    EXPECT_EQ(harness::to_doubles(got[0].second), (std::vector<double>{1, -2, 3}));
    EXPECT_EQ(got[1].first, "dir/b");
    EXPECT_EQ(harness::to_doubles(got[1].second), (std::vector<double>{7}));
    EXPECT_EQ(got[2].first, "c");
    EXPECT_EQ(got[2].second.shape(), Shape{0});
  }
}

TEST(NpzTest, what_savez_writes_is_a_valid_archive_by_hand) {
  MemoryWriter out;
  io::write_npz(out, {{"x", from_doubles({5, 6}, {2}, int16)}}, false);
  const std::string& z = out.bytes;
  std::string member = npy_of_int16({5, 6});
  // Local header, the member's name and bytes, then the directory and the end record.
  ASSERT_GE(z.size(), 30u + 5 + member.size());
  EXPECT_EQ(z.substr(0, 4), std::string("PK\x03\x04", 4));
  EXPECT_EQ(z.substr(30, 5), "x.npy");
  EXPECT_EQ(z.substr(35, member.size()), member);
  uint32_t crc;
  std::memcpy(&crc, z.data() + 14, 4);
  EXPECT_EQ(crc, crc32_bitwise(member));
  EXPECT_EQ(z.substr(z.size() - 22, 4), std::string("PK\x05\x06", 4));
}

TEST(NpzTest, corrupt_archives_are_refused) {
  std::string good = build_zip({{"a.npy", npy_of_int16({1, 2}), 0, false}});
  expect_invalid([&] { io::read_npz(io::BytesReader("just some bytes, no zip at all", "n.npz")); },
                 {"n.npz", "not a zip archive"});
  for (size_t n = 0; n < good.size(); ++n) {
    expect_invalid([&] { io::read_npz(io::BytesReader(good.substr(0, n), "cut.npz")); },
                   {"[load]", "cut.npz"});
  }
  std::string flipped = good;
  flipped[30 + 5 + npy_of_int16({}).size()] ^= 1;  // the member's first data byte
  expect_invalid([&] { io::read_npz(io::BytesReader(flipped, "crc.npz")); }, {"crc.npz", "CRC-32"});
  std::string lzma = build_zip({{"a.npy", npy_of_int16({1}), 14, false}});
  expect_invalid([&] { io::read_npz(io::BytesReader(lzma, "l.npz")); }, {"l.npz", "method 14"});
  ZipMember secret{"a.npy", npy_of_int16({1}), 0, false, 1};
  expect_invalid([&] { io::read_npz(io::BytesReader(build_zip({secret}), "e.npz")); },
                 {"e.npz", "encrypted"});
  std::string notnpy = build_zip({{"a.npy", "hello world", 0, false}});
  expect_invalid([&] { io::read_npz(io::BytesReader(notnpy, "b.npz")); },
                 {"b.npz member 'a.npy'", "not a .npy file"});
  std::string twice = build_zip({{"a.npy", npy_of_int16({1}), 0, false},
                                 {"a", npy_of_int16({2}), 0, false}});
  expect_invalid([&] { io::read_npz(io::BytesReader(twice, "t.npz")); }, {"t.npz", "'a'"});
}

TEST(NpzTest, bfloat16_and_duplicate_names_are_refused_before_writing) {
  MemoryWriter out;
  expect_invalid([&] { io::write_npz(out, {{"ok", zeros({2})}, {"bf", zeros({2}, bfloat16)}}, false); },
                 {"[savez]", "'bf'", "bfloat16"});
  expect_invalid([&] { io::write_npz(out, {{"a", zeros({2})}, {"a", zeros({2})}}, true); },
                 {"[savez_compressed]", "'a'"});
  EXPECT_TRUE(out.bytes.empty());
}

// ---- .safetensors -------------------------------------------------------------

TEST(SafetensorsTest, round_trip_of_every_dtype_shape_and_layout) {
  TempDir dir;
  std::unordered_map<std::string, array> arrays;
  std::unordered_map<std::string, std::vector<double>> values;
  int i = 0;
  for_each_case({all_dtypes, all_dtypes + Dtype::num_types},
                [&](const array& a, const std::vector<double>& v, const std::string&) {
                  std::string name = "t" + std::to_string(i++);
                  arrays.insert({name, a});
                  values.insert({name, v});
                });
  save_safetensors(dir / "w", arrays, {{"format", "mlx"}, {"note", "naïve \"quoted\""}});
  auto [got, meta] = load_safetensors(dir / "w.safetensors");
  EXPECT_EQ(meta, (std::unordered_map<std::string, std::string>{{"format", "mlx"},
                                                                {"note", "naïve \"quoted\""}}));
  ASSERT_EQ(got.size(), arrays.size());
  for (auto& [name, a] : arrays) expect_same(got.at(name), a, values.at(name), name);
}

std::string safetensors_file(std::string json, const std::string& data) {
  std::string f;
  put(f, uint64_t{json.size()});
  return f + json + data;
}

TEST(SafetensorsTest, hand_written_header_reads_back_in_order) {
  // A header of 8 k + 1 bytes: the data starts at an odd byte, so the float32
  // tensor is misaligned in the file and is copied; the order is the header's.
  std::string json =
      "{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"a\":{\"dtype\":\"I8\",\"shape\":[],\"data_offsets\":[8,9]}}";
  json += std::string((9 - json.size() % 8) % 8, ' ');
  std::string data;
  put(data, 2.5f);
  put(data, -1.0f);
  data += '\xfe';
  auto [arrays, meta] = io::read_safetensors(io::BytesReader(safetensors_file(json, data), "h.st"));
  ASSERT_EQ(arrays.size(), 2u);
  EXPECT_EQ(arrays[0].first, "b");
  EXPECT_EQ(harness::to_doubles(arrays[0].second), (std::vector<double>{2.5, -1}));
  EXPECT_FALSE(arrays[0].second.buffer().storage()->borrowed);
  EXPECT_EQ(arrays[1].first, "a");
  EXPECT_EQ(arrays[1].second.shape(), Shape{});
  EXPECT_EQ(arrays[1].second.item<int>(), -2);
  EXPECT_TRUE(meta.empty());
}

TEST(SafetensorsTest, save_writes_the_layout_by_hand) {
  MemoryWriter out;
  io::write_safetensors(out, {{"small", from_doubles({1, 2, 3}, {3}, uint8)},
                              {"wide", from_doubles({-1}, {1}, float64)}},
                        {{"k", "v"}});
  std::string json =
      "{\"__metadata__\":{\"k\":\"v\"},"
      "\"small\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[8,11]},"
      "\"wide\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}";
  json += std::string((8 - json.size() % 8) % 8, ' ');
  std::string data;
  put(data, -1.0);
  data += "\x01\x02\x03";
  EXPECT_EQ(out.bytes, safetensors_file(json, data));
}

TEST(SafetensorsTest, corrupt_files_are_refused) {
  auto file = [](const std::string& entry, size_t data_bytes) {
    return safetensors_file("{" + entry + "}", std::string(data_bytes, '\0'));
  };
  auto load_bytes = [](const std::string& bytes, const std::string& label) {
    return io::read_safetensors(io::BytesReader(bytes, label));
  };
  std::string ok = file("\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8);
  for (size_t n = 0; n < ok.size(); ++n) {
    expect_invalid([&] { load_bytes(ok.substr(0, n), "cut.safetensors"); },
                   {"[load]", "cut.safetensors"});
  }
  expect_invalid([&] { load_bytes(safetensors_file("{\"w\": nope}", ""), "j.st"); },
                 {"j.st", "not valid JSON"});
  expect_invalid([&] { load_bytes(file("\"w\":{\"dtype\":\"F32\",\"shape\":[200],"
                                       "\"data_offsets\":[0,800]}", 16), "far.st"); },
                 {"far.st", "'w'", "0..800", "16 bytes"});
  expect_invalid([&] { load_bytes(file("\"w\":{\"dtype\":\"F32\",\"shape\":[3],"
                                       "\"data_offsets\":[0,8]}", 8), "size.st"); },
                 {"size.st", "'w'", "(3,)", "8 bytes"});
  expect_invalid([&] { load_bytes(file("\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],"
                                       "\"data_offsets\":[0,1]}", 1), "f8.st"); },
                 {"f8.st", "'F8_E4M3'"});
  expect_invalid([&] { load_bytes(file("\"w\":{\"dtype\":\"F32\",\"shape\":[-1],"
                                       "\"data_offsets\":[0,0]}", 0), "neg.st"); },
                 {"neg.st", "non-negative"});
  expect_invalid([&] { load_bytes(file("\"w\":{\"dtype\":\"F32\",\"shape\":[1]}", 4), "off.st"); },
                 {"off.st", "data_offsets"});
  expect_invalid([&] { load_bytes(file("\"__metadata__\":{\"a\":1}", 0), "meta.st"); },
                 {"meta.st", "'a'", "not a string"});
}

TEST(SafetensorsTest, aligned_tensors_use_the_mapped_file) {
  TempDir dir;
  array w = from_doubles({1, 2, 3, 4}, {2, 2}, float32);
  save_safetensors(dir / "m.safetensors", {{"w", w}, {"b", from_doubles({1}, {1}, uint8)}});
  auto got = load_safetensors(dir / "m.safetensors").first.at("w");
  ASSERT_TRUE(got.buffer().storage());
  EXPECT_TRUE(got.buffer().storage()->borrowed);
  // Saving over the file replaces it: the loaded array keeps the old values.
  save_safetensors(dir / "m.safetensors", {{"w", from_doubles({9, 9, 9, 9}, {2, 2}, float32)}});
  EXPECT_EQ(harness::to_doubles(got), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(harness::to_doubles(load_safetensors(dir / "m.safetensors").first.at("w")),
            (std::vector<double>{9, 9, 9, 9}));
}

// ---- .gguf --------------------------------------------------------------------

TEST(GGUFTest, round_trip_of_every_dtype_shape_and_layout_and_metadata) {
  TempDir dir;
  std::unordered_map<std::string, array> arrays;
  std::unordered_map<std::string, std::vector<double>> values;
  int i = 0;
  for_each_case(kGGUFDtypes, [&](const array& a, const std::vector<double>& v, const std::string&) {
    std::string name = "t" + std::to_string(i++);
    arrays.insert({name, a});
    values.insert({name, v});
  });
  std::unordered_map<std::string, GGUFMetaData> meta = {
      {"s", std::string("naïve")},
      {"strs", std::vector<std::string>{"a", "", "b"}},
      {"flag", array(true)},
      {"u64", array(uint64_t{18446744073709551615ull})},
      {"f32s", from_doubles({0.5, -2}, {2}, float32)},
      {"empty", from_doubles({}, {0}, int16)}};
  save_gguf(dir / "g", arrays, meta);
  auto [got, got_meta] = load_gguf(dir / "g.gguf");
  ASSERT_EQ(got.size(), arrays.size());
  for (auto& [name, a] : arrays) expect_same(got.at(name), a, values.at(name), name);
  ASSERT_EQ(got_meta.size(), meta.size());
  EXPECT_EQ(std::get<std::string>(got_meta.at("s")), "naïve");
  EXPECT_EQ(std::get<std::vector<std::string>>(got_meta.at("strs")),
            (std::vector<std::string>{"a", "", "b"}));
  for (auto key : {"flag", "u64", "f32s", "empty"}) {
    array want = std::get<array>(meta.at(key)), have = std::get<array>(got_meta.at(key));
    EXPECT_EQ(have.dtype(), want.dtype()) << key;
    EXPECT_EQ(have.shape(), want.shape()) << key;
    EXPECT_TRUE(array_equal(have, want).item<bool>()) << key;
  }
}

// A GGUF file built field by field (Note [The GGUF layout] in io/gguf.cpp);
// nothing follows the last tensor's data.
struct Tensor {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order
  uint32_t type;
  std::string data;
};
void put_string(std::string& s, const std::string& v) {
  put(s, uint64_t{v.size()});
  s += v;
}
std::string build_gguf(const std::string& metadata, int n_meta, const std::vector<Tensor>& tensors,
                       uint32_t version = 3) {
  std::string f = "GGUF";
  put(f, version);
  put(f, uint64_t{tensors.size()});
  put(f, uint64_t(n_meta));
  f += metadata;
  std::string data;
  for (size_t i = 0; i < tensors.size(); ++i) {
    auto& t = tensors[i];
    put_string(f, t.name);
    put(f, uint32_t(t.dims.size()));
    for (auto d : t.dims) put(f, d);
    put(f, t.type);
    put(f, uint64_t{data.size()});
    data += t.data;
    if (i + 1 < tensors.size()) data.append((32 - data.size() % 32) % 32, '\0');
  }
  f.append((32 - f.size() % 32) % 32, '\0');
  return f + data;
}

uint16_t half_bits(float x) { return float16_t(x).bits; }

// Blocks with scales that are powers of two, so that every value is exact in float16.
std::string q_blocks(uint32_t type, int n, uint64_t seed, std::vector<float>& want,
                     std::vector<uint32_t>& codes, std::vector<float>& scales,
                     std::vector<float>& biases) {
  std::mt19937 gen(seed);
  std::string out;
  for (int b = 0; b < n; ++b) {
    float d = std::ldexp(1.0f, int(gen() % 5) - 3) * (gen() % 2 ? 1 : -1);
    float m = std::ldexp(float(int(gen() % 9) - 4), -2);
    put(out, half_bits(d));
    if (type == 3) put(out, half_bits(m));
    uint8_t q[32];
    for (auto& x : q) x = gen() & 0xff;
    if (type == 8) {
      out.append(reinterpret_cast<char*>(q), 32);
      for (int j = 0; j < 32; ++j) {
        want.push_back(d * float(int8_t(q[j])));
        codes.push_back(uint32_t(int8_t(q[j]) + 128));
      }
      scales.push_back(d);
      biases.push_back(-128 * d);
      continue;
    }
    out.append(reinterpret_cast<char*>(q), 16);
    for (int j = 0; j < 32; ++j) {
      int nib = j < 16 ? q[j] & 15 : q[j - 16] >> 4;
      want.push_back(type == 2 ? d * float(nib - 8) : d * float(nib) + m);
      codes.push_back(uint32_t(nib));
    }
    scales.push_back(d);
    biases.push_back(type == 2 ? -8 * d : m);
  }
  return out;
}

TEST(GGUFTest, q4_0_q4_1_q8_0_blocks_load_as_affine_triples) {
  for (uint32_t type : {2u, 3u, 8u}) {
    const int bits = type == 8 ? 8 : 4, rows = 3, cols = 64;
    std::vector<float> want, scales, biases;
    std::vector<uint32_t> codes;
    std::string blocks = q_blocks(type, rows * cols / 32, type, want, codes, scales, biases);
    std::string file = build_gguf("", 0, {{"blk.0.w.weight", {uint64_t(cols), uint64_t(rows)}, type, blocks}});
    auto [arrays, meta] = io::read_gguf(io::BytesReader(file, "q.gguf"));
    ASSERT_EQ(arrays.size(), 3u);
    EXPECT_EQ(arrays[0].first, "blk.0.w.weight");
    EXPECT_EQ(arrays[1].first, "blk.0.w.scales");
    EXPECT_EQ(arrays[2].first, "blk.0.w.biases");
    array w = arrays[0].second, s = arrays[1].second, b = arrays[2].second;
    ASSERT_EQ(w.dtype(), uint32);
    ASSERT_EQ(w.shape(), (Shape{rows, cols * bits / 32}));
    ASSERT_EQ(s.shape(), (Shape{rows, cols / 32}));
    EXPECT_EQ(s.dtype(), float16);
    // Codes packed into words one bit at a time, value i at bits [i * bits, (i + 1) * bits).
    std::vector<uint32_t> words(w.size(), 0);
    for (size_t i = 0; i < codes.size(); ++i) {
      for (int k = 0; k < bits; ++k) {
        size_t bit = i * bits + k;
        words[bit / 32] |= ((codes[i] >> k) & 1u) << (bit % 32);
      }
    }
    array wc = copy(w);
    eval(wc);
    EXPECT_EQ(std::vector<uint32_t>(wc.data<uint32_t>(), wc.data<uint32_t>() + wc.size()), words);
    EXPECT_EQ(harness::to_doubles(s), std::vector<double>(scales.begin(), scales.end()));
    EXPECT_EQ(harness::to_doubles(b), std::vector<double>(biases.begin(), biases.end()));
    array values = dequantize(w, s, b, 32, bits);
    EXPECT_EQ(values.dtype(), float16);
    EXPECT_EQ(harness::to_doubles(values), std::vector<double>(want.begin(), want.end()))
        << "type " << type;
  }
}

TEST(GGUFTest, q5_0_blocks_load_dequantized_to_float16) {
  // d = 0.5; qh sets bit 4 of values 0 and 17; qs[j] = j | (15 - j) << 4.
  std::string block;
  put(block, half_bits(0.5f));
  put(block, uint32_t{(1u << 0) | (1u << 17)});
  for (int j = 0; j < 16; ++j) block += char(j | ((15 - j) << 4));
  std::vector<double> want(32);
  for (int j = 0; j < 16; ++j) {
    want[j] = 0.5 * ((j | (j == 0 ? 16 : 0)) - 16);
    want[j + 16] = 0.5 * (((15 - j) | (j == 1 ? 16 : 0)) - 16);
  }
  auto [arrays, meta] = io::read_gguf(io::BytesReader(build_gguf("", 0, {{"x", {32}, 6, block}}), "q5.gguf"));
  ASSERT_EQ(arrays.size(), 1u);
  EXPECT_EQ(arrays[0].second.dtype(), float16);
  EXPECT_EQ(harness::to_doubles(arrays[0].second), want);
}

TEST(GGUFTest, save_writes_the_layout_by_hand) {
  MemoryWriter out;
  io::write_gguf(out, {{"x", from_doubles({1, 2, 3}, {3}, int16)}},
                 {{"name", std::string("t")}, {"general.alignment", array(uint32_t{64})}});
  std::string meta;
  put_string(meta, "name");
  put(meta, uint32_t{8});
  put_string(meta, "t");
  put_string(meta, "general.alignment");
  put(meta, uint32_t{4});
  put(meta, uint32_t{64});
  std::string want = "GGUF";
  put(want, uint32_t{3});
  put(want, uint64_t{1});
  put(want, uint64_t{2});
  want += meta;
  put_string(want, "x");
  put(want, uint32_t{1});
  put(want, uint64_t{3});
  put(want, uint32_t{25});  // I16
  put(want, uint64_t{0});
  want.append((64 - want.size() % 64) % 64, '\0');
  for (int16_t v : {1, 2, 3}) put(want, v);
  want.append(64 - 6, '\0');
  EXPECT_EQ(out.bytes, want);
}

TEST(GGUFTest, corrupt_files_are_refused) {
  std::string meta;
  put_string(meta, "general.name");
  put(meta, uint32_t{8});
  put_string(meta, "m");
  std::string f32;
  for (float x : {1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f}) put(f32, x);
  std::string good = build_gguf(meta, 1, {{"a", {8}, 0, f32}, {"b", {8}, 0, f32}});
  ASSERT_EQ(io::read_gguf(io::BytesReader(good, "g.gguf")).first.size(), 2u);
  for (size_t n = 0; n < good.size(); ++n) {
    expect_invalid([&] { io::read_gguf(io::BytesReader(good.substr(0, n), "cut.gguf")); },
                   {"[load]", "cut.gguf", "gguf"});
  }
  std::string bad = good;
  bad[3] = 'L';
  expect_invalid([&] { io::read_gguf(io::BytesReader(bad, "m.gguf")); },
                 {"not a gguf file", "m.gguf", "'GGUL'"});
  expect_invalid([&] { io::read_gguf(io::BytesReader(build_gguf("", 0, {}, 1), "v.gguf")); },
                 {"gguf version 1", "v.gguf"});
  expect_invalid([&] { io::read_gguf(io::BytesReader(build_gguf("", 0, {{"w", {256}, 16, std::string(66, '\0')}}), "iq.gguf")); },
                 {"iq.gguf", "'w'", "IQ2_XXS (16)"});
  expect_invalid([&] { io::read_gguf(io::BytesReader(build_gguf("", 0, {{"w", {48}, 2, std::string(36, '\0')}}), "b.gguf")); },
                 {"b.gguf", "'w'", "Q4_0", "multiple of 32"});
  std::string nested;
  put_string(nested, "nested");
  put(nested, uint32_t{9});
  put(nested, uint32_t{9});
  put(nested, uint64_t{1});
  expect_invalid([&] { io::read_gguf(io::BytesReader(build_gguf(nested, 1, {}), "n.gguf")); },
                 {"n.gguf", "'nested'", "array of arrays"});
  expect_invalid([&] { io::read_gguf(io::BytesReader(build_gguf("", 0, {{"w", {1ull << 40}, 0, ""}}), "d.gguf")); },
                 {"d.gguf", "1099511627776"});
}

TEST(GGUFTest, unsupported_dtypes_and_metadata_are_refused_before_writing) {
  MemoryWriter out;
  expect_invalid([&] { io::write_gguf(out, {{"ok", zeros({2})}, {"bad", zeros({2}, uint8)}}, {}); },
                 {"[save_gguf]", "'bad'", "uint8"});
  expect_invalid([&] { io::write_gguf(out, {}, {{"m", zeros({2, 2})}}); },
                 {"[save_gguf]", "'m'", "scalar or 1-D", "(2,2)"});
  expect_invalid([&] { io::write_gguf(out, {}, {{"m", array(float16_t(1.f))}}); },
                 {"[save_gguf]", "'m'", "float16"});
  expect_invalid([&] { io::write_gguf(out, {}, {{"general.alignment", array(48)}}); },
                 {"[save_gguf]", "general.alignment"});
  EXPECT_TRUE(out.bytes.empty());
}

// ---- saving in place ----------------------------------------------------------

TEST(SaveTest, a_failed_save_leaves_the_existing_file_untouched) {
  TempDir dir;
  save(dir / "a.npy", from_doubles({1, 2}, {2}, float32));
  save_safetensors(dir / "w.safetensors", {{"w", zeros({2})}});
  save_gguf(dir / "g.gguf", {{"w", zeros({2})}});
  std::string npy = read_file(dir / "a.npy"), st = read_file(dir / "w.safetensors"),
              gguf = read_file(dir / "g.gguf");
  EXPECT_THROW(save(dir / "a.npy", zeros({2}, bfloat16)), std::invalid_argument);
  EXPECT_THROW(save_gguf(dir / "g.gguf", {{"w", zeros({2}, uint8)}}), std::invalid_argument);
  // The header is written before the second tensor's evaluation fails.
  array singular = linalg::inv(zeros({2, 2}));
  EXPECT_THROW(save_safetensors(dir / "w.safetensors", {{"a", ones({4})}, {"b", singular}}),
               std::invalid_argument);
  EXPECT_EQ(read_file(dir / "a.npy"), npy);
  EXPECT_EQ(read_file(dir / "w.safetensors"), st);
  EXPECT_EQ(read_file(dir / "g.gguf"), gguf);
  // No temporary file is left behind.
  EXPECT_EQ(dir.files(), (std::vector<std::string>{"a.npy", "g.gguf", "w.safetensors"}));
  // A directory that does not exist: nothing is created.
  EXPECT_THROW(save(dir / "missing/a.npy", zeros({2})), std::runtime_error);
  EXPECT_THROW(savez(dir / "missing/z", {{"a", zeros({2})}}), std::runtime_error);
  EXPECT_FALSE(fs::exists(dir / "missing"));
}

TEST(SaveTest, extensions_are_appended_once) {
  EXPECT_EQ(io::with_extension("w", ".npy"), "w.npy");
  EXPECT_EQ(io::with_extension("w.npy", ".npy"), "w.npy");
  EXPECT_EQ(io::with_extension("w.npz", ".npy"), "w.npz.npy");
}

TEST(LoadTest, missing_files_and_directories_are_runtime_errors) {
  TempDir dir;
  try {
    load(dir / "nothing.npy");
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("nothing.npy"), std::string::npos) << e.what();
  }
  fs::create_directory(dir / "sub.npy");
  EXPECT_THROW(load(dir / "sub.npy"), std::runtime_error);
  write_file(dir / "empty.gguf", "");
  expect_invalid([&] { load_gguf(dir / "empty.gguf"); }, {"truncated gguf file", "empty.gguf"});
}

}  // namespace
