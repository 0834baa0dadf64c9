// .npy files: Note [The .npy layout] in npy.h.
#include "tessera/io/npy.h"

#include <algorithm>
#include <optional>

#include "tessera/io/io.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/utils.h"

namespace tessera {

namespace io::detail {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

// The descr of a dtype ('<f4'); bfloat16 has none.
std::optional<std::string> descr_of(Dtype t) {
  if (t == bfloat16) return std::nullopt;
  std::string kind(1, static_cast<char>(kindof(t)));
  return (t.size == 1 ? "|" : "<") + kind + std::to_string(t.size);
}

// ---- the header's dict literal -------------------------------------------

// A reader of the few Python literals a header holds: strings, True/False,
// and tuples of integers.
class Literal {
 public:
  Literal(std::string_view text, const Bytes& b) : s_(text), b_(b) {}

  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool accept(char c) {
    skip_space();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  void expect(char c, const char* where) {
    if (!accept(c)) bad(std::string("expected '") + c + "' " + where);
  }
  char peek() {
    skip_space();
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  std::string string() {
    skip_space();
    char q = i_ < s_.size() ? s_[i_] : '\0';
    if (q != '\'' && q != '"') bad("expected a string");
    size_t end = s_.find(q, i_ + 1);
    if (end == std::string_view::npos) bad("a string does not end");
    std::string v(s_.substr(i_ + 1, end - i_ - 1));
    i_ = end + 1;
    return v;
  }
  bool boolean() {
    skip_space();
    for (auto [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      if (s_.substr(i_, std::strlen(word)) == word) {
        i_ += std::strlen(word);
        return value;
      }
    }
    bad("fortran_order must be True or False");
  }
  Shape shape() {
    expect('(', "before the shape");
    Shape shape;
    while (!accept(')')) {
      skip_space();
      size_t start = i_;
      uint64_t v = 0;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (v > (uint64_t{1} << 40)) bad("a dimension of the shape is too large");
        v = v * 10 + static_cast<uint64_t>(s_[i_++] - '0');
      }
      if (i_ == start) bad("the shape must be a tuple of non-negative integers");
      if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // Python 2's long integers
      shape.push_back(dimension(v, b_.label));
      if (!accept(',') && peek() != ')') bad("expected ',' or ')' in the shape");
    }
    return shape;
  }
  [[noreturn]] void bad(const std::string& what) {
    fail("load", "the .npy header of " + b_.label + " is malformed (" + what + " at character " +
                     std::to_string(i_) + "): " + std::string(s_));
  }

 private:
  std::string_view s_;
  const Bytes& b_;
  size_t i_ = 0;
};

struct Header {
  std::string descr;
  bool fortran = false;
  Shape shape;
};

Header parse_header(std::string_view text, const Bytes& b) {
  Literal lit(text, b);
  Header h;
  bool seen[3] = {false, false, false};
  lit.expect('{', "at the start");
  while (!lit.accept('}')) {
    std::string key = lit.string();
    lit.expect(':', "after a key");
    if (key == "descr") {
      if (lit.peek() == '[') {
        fail("load", b.label + " holds a structured NumPy dtype, which is not supported: " +
                         std::string(text));
      }
      h.descr = lit.string();
      seen[0] = true;
    } else if (key == "fortran_order") {
      h.fortran = lit.boolean();
      seen[1] = true;
    } else if (key == "shape") {
      h.shape = lit.shape();
      seen[2] = true;
    } else {
      lit.bad("unknown key '" + key + "'");
    }
    if (!lit.accept(',') && lit.peek() != '}') lit.bad("expected ',' or '}'");
  }
  if (!(seen[0] && seen[1] && seen[2])) lit.bad("descr, fortran_order and shape are required");
  return h;
}

// The dtype of a descr and whether its bytes are big-endian.
std::pair<Dtype, bool> parse_descr(const std::string& descr, const Bytes& b) {
  std::string_view d = descr;
  bool big = false;
  if (!d.empty() && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=')) {
    big = d[0] == '>';
    d.remove_prefix(1);
  }
  if (d == "V2") return {bfloat16, big};
  for (Dtype t : all_dtypes) {
    if (t == bfloat16) continue;
    std::string code(1, static_cast<char>(kindof(t)));
    code += std::to_string(t.size);
    if (d == code) {
      return {t, big && t.size > 1};
    }
  }
  fail("load", b.label + " holds NumPy dtype '" + descr +
                   "', which Tessera has no dtype for (bool, integers of 8 to 64 bits, float16, "
                   "float32, float64, complex64 are read)");
}

}  // namespace

Npy npy_of(const array& a, const char* op, const std::string& name) {
  auto descr = descr_of(a.dtype());
  if (!descr) {
    fail(op, "the .npy format cannot hold bfloat16 (" + name +
                 "); use save_safetensors, or convert with astype");
  }
  Npy out{{}, host_data(a, /*allow_col_major=*/true)};
  bool fortran = !out.data.flags().row_contiguous;
  std::string shape = "(";
  for (size_t i = 0; i < a.ndim(); ++i) {
    shape += (i ? ", " : "") + std::to_string(a.shape()[i]);
  }
  shape += a.ndim() == 1 ? ",)" : ")";
  std::string dict = "{'descr': '" + *descr + "', 'fortran_order': " +
                     (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
  // Version 1.0 (a 2-byte length) unless the header needs more.
  size_t prefix = kMagicSize + 2 + 2;
  size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  bool v2 = total - prefix > 0xffff;
  if (v2) {
    prefix += 2;
    total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  }
  out.header.assign(kMagic, kMagicSize);
  out.header += static_cast<char>(v2 ? 2 : 1);
  out.header += '\0';
  if (v2) {
    put_le(out.header, static_cast<uint32_t>(total - prefix));
  } else {
    put_le(out.header, static_cast<uint16_t>(total - prefix));
  }
  out.header += dict;
  out.header.append(total - out.header.size() - 1, ' ');
  out.header += '\n';
  return out;
}

array read_npy(const Bytes& b, StreamOrDevice s) {
  Cursor c(b);
  auto magic = c.take(kMagicSize, "the magic string");
  if (magic != std::string_view(kMagic, kMagicSize)) {
    fail("load", "not a .npy file: " + b.label + " does not start with \\x93NUMPY");
  }
  auto major = c.get<uint8_t>("the version");
  c.get<uint8_t>("the version");
  size_t length;
  if (major == 1) {
    length = c.get<uint16_t>("the header length");
  } else if (major == 2 || major == 3) {
    length = c.get<uint32_t>("the header length");
  } else {
    fail("load", ".npy version " + std::to_string(major) + " of " + b.label +
                     " is not supported (1, 2 and 3 are)");
  }
  Header h = parse_header(c.take(length, "the header"), b);
  auto [dtype, big] = parse_descr(h.descr, b);
  size_t count = element_count(h.shape, "the .npy header of " + b.label);
  c.need(count, dtype.size, "the data of shape " + shape_str(h.shape) + " and dtype " +
                                dtype_name(dtype));
  if (h.fortran) std::reverse(h.shape.begin(), h.shape.end());
  size_t unit = !big ? 0 : dtype == complex64 ? 4 : dtype.size;
  array a = array_at(b, c.pos(), h.shape, dtype, unit);
  return h.fortran && a.ndim() > 1 ? transpose(a, s) : a;
}

}  // namespace io::detail

void io::write_npy(Writer& out, const array& a) {
  auto npy = detail::npy_of(a, "save", "the array");
  out.write(npy.header.data(), npy.header.size());
  out.write(detail::bytes_of(npy.data), npy.data.nbytes());
  out.finish();
}

void save(std::shared_ptr<io::Writer> out, array a) { io::write_npy(*out, a); }

void save(std::string file, array a) {
  save(std::make_shared<io::FileWriter>(io::with_extension(std::move(file), ".npy")),
       std::move(a));
}

array load(std::shared_ptr<io::Reader> in, StreamOrDevice s) {
  return io::detail::read_npy(io::detail::bytes_of(*in, "npy"), s);
}

array load(std::string file, StreamOrDevice s) {
  return load(std::make_shared<io::FileReader>(std::move(file)), s);
}

}  // namespace tessera
