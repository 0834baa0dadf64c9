// File I/O: save, savez, savez_compressed,
// save_safetensors, save_gguf and load, over the formats of tessera/io. Paths
// are str, bytes or os.PathLike; binary file objects are written through
// their write() and read whole with read().
#include "convert.h"

namespace tessera::python {

namespace {

// Strings of files (names, metadata) may hold any bytes: those that are not
// UTF-8 round-trip through Python as surrogates, as os.fsdecode does.
nb::str py_str(const std::string& s) {
  return nb::steal<nb::str>(PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()),
                                                 "surrogateescape"));
}

std::string cpp_str(nb::handle s) {
  nb::object b = nb::steal(PyUnicode_AsEncodedString(s.ptr(), "utf-8", "surrogateescape"));
  if (!b.is_valid()) throw nb::python_error();
  return std::string(PyBytes_AsString(b.ptr()), static_cast<size_t>(PyBytes_Size(b.ptr())));
}

std::string py_type(nb::handle v) { return nb::cast<std::string>(nb::type_name(v.type())); }

// A file object's name for messages: its .name, else its type.
std::string label_of(nb::handle file) {
  if (nb::hasattr(file, "name")) return nb::cast<std::string>(nb::str(file.attr("name")));
  return "<" + py_type(file) + ">";
}

class PyWriter : public io::Writer {
 public:
  explicit PyWriter(nb::handle file) : write_(file.attr("write")), label_(label_of(file)) {}
  std::string label() const override { return label_; }
  void write(const char* data, size_t n) override {
    nb::gil_scoped_acquire gil;
    while (n > 0) {
      nb::object view = nb::steal(PyMemoryView_FromMemory(
          const_cast<char*>(data), static_cast<Py_ssize_t>(n), PyBUF_READ));
      nb::object wrote = write_(view);
      size_t m = wrote.is_none() ? n : nb::cast<size_t>(wrote);  // None: all of it (BufferedIO)
      if (m == 0 || m > n) {
        throw std::runtime_error("[save] " + label_ + ".write() wrote " + std::to_string(m) +
                                 " of " + std::to_string(n) + " bytes");
      }
      data += m;
      n -= m;
    }
  }

 private:
  nb::object write_;
  std::string label_;
};

// Runs write(writer) without the GIL, to a path (with `extension` added) or a
// binary file object.
template <typename F>
void save_to(nb::handle file, const char* op, const char* extension, F&& write) {
  if (auto path = as_path(file)) {
    io::FileWriter out(io::with_extension(*path, extension));
    nb::gil_scoped_release nogil;
    write(out);
  } else if (nb::hasattr(file, "write")) {
    PyWriter out(file);
    nb::gil_scoped_release nogil;
    write(out);
  } else {
    throw nb::type_error(("[" + std::string(op) + "] file must be a path or a binary file object, not " +
                          py_type(file)).c_str());
  }
}

io::Entries<array> arrays_of(nb::handle d, const char* op) {
  if (!nb::isinstance<nb::dict>(d)) {
    throw nb::type_error(("[" + std::string(op) + "] arrays must be a dict of str to array, not " +
                          py_type(d)).c_str());
  }
  io::Entries<array> out;
  for (auto [k, v] : nb::borrow<nb::dict>(d)) {
    if (!nb::isinstance<nb::str>(k)) {
      throw nb::type_error(("[" + std::string(op) + "] names must be str, not " + py_type(k)).c_str());
    }
    out.emplace_back(cpp_str(k), to_array(v));
  }
  return out;
}

void savez(nb::handle file, nb::args args, nb::kwargs kwargs, bool compressed) {
  const char* op = compressed ? "savez_compressed" : "savez";
  io::Entries<array> arrays;
  for (size_t i = 0; i < args.size(); ++i) {
    arrays.emplace_back("arr_" + std::to_string(i), to_array(args[i]));
  }
  for (auto [k, v] : kwargs) {
    std::string name = cpp_str(k);
    if (name.rfind("arr_", 0) == 0 &&
        std::any_of(arrays.begin(), arrays.end(), [&](auto& e) { return e.first == name; })) {
      throw nb::value_error(("[" + std::string(op) + "] cannot use un-named variables and keyword " + name).c_str());
    }
    arrays.emplace_back(name, to_array(v));
  }
  save_to(file, op, ".npz", [&](io::Writer& out) { io::write_npz(out, arrays, compressed); });
}

// GGUF refuses dtypes here, where they are named as Python names them.
void check_gguf_dtype(const char* what, const std::string& name, const array& a, bool metadata) {
  if ((metadata ? io::gguf_value_type(a.dtype()) : io::gguf_tensor_type(a.dtype())) >= 0) return;
  std::string dtype = nb::cast<std::string>(nb::repr(nb::cast(a.dtype())));
  throw nb::value_error(("[save_gguf] " + std::string(what) + " '" + name + "' has dtype " + dtype +
                         (metadata ? ", which GGUF metadata cannot hold"
                                   : ", which has no GGUF type (float32, float16, bfloat16, "
                                     "float64, int8, int16, int32 and int64 have)")).c_str());
}

io::Entries<GGUFMetaData> gguf_metadata(nb::handle metadata) {
  io::Entries<GGUFMetaData> out;
  if (metadata.is_none()) return out;
  if (!nb::isinstance<nb::dict>(metadata)) {
    throw nb::type_error(("[save_gguf] metadata must be a dict, not " + py_type(metadata)).c_str());
  }
  for (auto [k, v] : nb::borrow<nb::dict>(metadata)) {
    if (!nb::isinstance<nb::str>(k)) {
      throw nb::value_error(("[save_gguf] metadata keys must be str, not " + py_type(k)).c_str());
    }
    std::string key = cpp_str(k);
    if (nb::isinstance<nb::str>(v)) {
      out.emplace_back(key, cpp_str(v));
    } else if (nb::isinstance<nb::list>(v)) {
      std::vector<std::string> strings;
      for (auto s : nb::borrow<nb::list>(v)) {
        if (!nb::isinstance<nb::str>(s)) {
          throw nb::value_error(("[save_gguf] metadata '" + key + "': a list must hold only str").c_str());
        }
        strings.push_back(cpp_str(s));
      }
      out.emplace_back(key, std::move(strings));
    } else if (nb::isinstance<array>(v)) {
      array a = nb::cast<array>(v);
      check_gguf_dtype("metadata", key, a, true);
      out.emplace_back(key, a);
    } else {
      throw nb::value_error(("[save_gguf] metadata '" + key +
                             "' must be an array, a str or a list of str, not " + py_type(v)).c_str());
    }
  }
  return out;
}

nb::dict to_dict(const io::Entries<array>& arrays) {
  nb::dict d;
  for (auto& [k, a] : arrays) d[py_str(k)] = nb::cast(a);
  return d;
}

nb::object load(nb::handle file, std::optional<std::string> format, bool return_metadata,
                StreamArg s) {
  auto path = as_path(file);
  if (!path && !nb::hasattr(file, "read")) {
    throw nb::type_error(("[load] file must be a path or a binary file object, not " +
                          py_type(file)).c_str());
  }
  std::string name = path ? *path : nb::hasattr(file, "name") ? label_of(file) : "";
  if (!format) {
    std::string base = name.substr(name.rfind('/') + 1);
    auto dot = base.rfind('.');
    if (dot == std::string::npos) {
      throw nb::value_error(("[load] cannot infer the format of '" + name + "'; pass format=").c_str());
    }
    format = base.substr(dot + 1);
  }
  const std::string& f = *format;
  if (f != "npy" && f != "npz" && f != "safetensors" && f != "gguf") {
    throw nb::value_error(("[load] format '" + f +
                           "' is not supported (supported: 'npy', 'npz', 'safetensors', 'gguf')").c_str());
  }
  if (return_metadata && f != "safetensors" && f != "gguf") {
    throw nb::value_error(("[load] metadata is only returned for safetensors and gguf, not " + f).c_str());
  }
  std::shared_ptr<io::Reader> in;
  if (path) {
    nb::gil_scoped_release nogil;
    in = std::make_shared<io::FileReader>(*path);
  } else {
    nb::object data = file.attr("read")();
    if (!nb::isinstance<nb::bytes>(data)) {
      throw nb::type_error(("[load] " + label_of(file) + ".read() gave " + py_type(data) +
                            ", not bytes: open the file in binary mode").c_str());
    }
    nb::bytes b = nb::borrow<nb::bytes>(data);
    in = std::make_shared<io::BytesReader>(std::string(b.c_str(), b.size()), label_of(file));
  }
  if (f == "npy") {
    std::optional<array> a;
    {
      nb::gil_scoped_release nogil;
      a = tessera::load(in, s);
    }
    return nb::cast(*a);
  }
  if (f == "npz") {
    io::Entries<array> arrays;
    {
      nb::gil_scoped_release nogil;
      arrays = io::read_npz(*in, s);
    }
    return to_dict(arrays);
  }
  if (f == "safetensors") {
    std::pair<io::Entries<array>, io::Entries<std::string>> loaded;
    {
      nb::gil_scoped_release nogil;
      loaded = io::read_safetensors(*in);
    }
    nb::dict arrays = to_dict(loaded.first);
    if (!return_metadata) return arrays;
    nb::dict meta;
    for (auto& [k, v] : loaded.second) meta[py_str(k)] = py_str(v);
    return nb::make_tuple(arrays, meta);
  }
  std::pair<io::Entries<array>, io::Entries<GGUFMetaData>> loaded;
  {
    nb::gil_scoped_release nogil;
    loaded = io::read_gguf(*in);
  }
  nb::dict arrays = to_dict(loaded.first);
  if (!return_metadata) return arrays;
  nb::dict meta;
  for (auto& [k, v] : loaded.second) {
    nb::object value = nb::none();
    if (auto* a = std::get_if<array>(&v)) value = nb::cast(*a);
    if (auto* str = std::get_if<std::string>(&v)) value = py_str(*str);
    if (auto* list = std::get_if<std::vector<std::string>>(&v)) {
      nb::list l;
      for (auto& x : *list) l.append(py_str(x));
      value = l;
    }
    meta[py_str(k)] = value;
  }
  return nb::make_tuple(arrays, meta);
}

}  // namespace

void init_io(nb::module_& m) {
  def_named(m, "save", [](nb::handle file, nb::handle arr) {
    array a = to_array(arr);
    save_to(file, "save", ".npy", [&](io::Writer& out) { io::write_npy(out, a); });
  }, "file"_a, "arr"_a,
        "Saves an array in the .npy format (\".npy\" is appended to a path without it).");
  def_named(m, "savez", [](nb::handle file, nb::args args, nb::kwargs kwargs) {
    savez(file, args, kwargs, false);
  }, "file"_a, "args"_a, "kwargs"_a,
        "Saves arrays uncompressed in the .npz format: positional ones as arr_0, arr_1, ..., "
        "keyword ones under their names (\".npz\" is appended to a path without it).");
  def_named(m, "savez_compressed", [](nb::handle file, nb::args args,
                                                         nb::kwargs kwargs) {
    savez(file, args, kwargs, true);
  }, "file"_a, "args"_a, "kwargs"_a, "savez with deflate compression.");
  def_named(m, "save_safetensors", [](nb::handle file, nb::handle arrays, nb::handle metadata) {
    auto entries = arrays_of(arrays, "save_safetensors");
    io::Entries<std::string> meta;
    if (!metadata.is_none()) {
      if (!nb::isinstance<nb::dict>(metadata)) {
        throw nb::value_error(("[save_safetensors] metadata must be a dict of str to str, not " +
                               py_type(metadata)).c_str());
      }
      for (auto [k, v] : nb::borrow<nb::dict>(metadata)) {
        if (!nb::isinstance<nb::str>(k) || !nb::isinstance<nb::str>(v)) {
          throw nb::value_error(("[save_safetensors] metadata must map str to str, got " +
                                 nb::cast<std::string>(nb::repr(k)) + ": " +
                                 nb::cast<std::string>(nb::repr(v))).c_str());
        }
        meta.emplace_back(cpp_str(k), cpp_str(v));
      }
    }
    save_to(file, "save_safetensors", ".safetensors",
            [&](io::Writer& out) { io::write_safetensors(out, entries, meta); });
  }, "file"_a, "arrays"_a, "metadata"_a = nb::none(),
        "Saves a dict of arrays in the safetensors format, with optional str -> str metadata "
        "(\".safetensors\" is appended to a path without it).");
  def_named(m, "save_gguf", [](nb::handle file, nb::handle arrays, nb::handle metadata) {
    auto path = as_path(file);
    if (!path) {
      throw nb::value_error(("[save_gguf] file must be a path (str or os.PathLike), not " +
                             py_type(file)).c_str());
    }
    auto entries = arrays_of(arrays, "save_gguf");
    for (auto& [name, a] : entries) check_gguf_dtype("tensor", name, a, false);
    auto meta = gguf_metadata(metadata);
    save_to(file, "save_gguf", ".gguf",
            [&](io::Writer& out) { io::write_gguf(out, entries, meta); });
  }, "file"_a, "arrays"_a, "metadata"_a = nb::none(),
        "Saves a dict of arrays in the GGUF format (version 3), with optional metadata whose "
        "values are arrays (scalars or 1-D), str or lists of str (\".gguf\" is appended to a "
        "path without it).");
  def(m, "load", &load, "file"_a, pos_only(), "format"_a = nb::none(),
      "return_metadata"_a = false, nb::kw_only(), "stream"_a = nb::none(),
      "Loads a .npy file (an array), or a .npz, .safetensors or .gguf file (a dict of arrays; "
      "with return_metadata, safetensors and gguf also give their metadata). The format is "
      "`format`, else the extension of the path (or of a file object's name).");
}

}  // namespace tessera::python
