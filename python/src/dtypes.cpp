// Dtypes, their categories, finfo / iinfo; devices and streams; eval.
#include <nanobind/stl/map.h>
#include <nanobind/stl/unique_ptr.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <memory>
#include <sstream>

#include "convert.h"
#include "tessera/core/gpu.h"

namespace tessera::python {

namespace {

std::string dtype_repr(Dtype t) {
  std::string n = dtype_name(t);
  return "tessera.core." + (n == "bool" ? std::string("bool_") : n);
}

const char* category_name(Category c) {
  switch (c) {
    case Category::complexfloating: return "complexfloating";
    case Category::floating: return "floating";
    case Category::inexact: return "inexact";
    case Category::signedinteger: return "signedinteger";
    case Category::unsignedinteger: return "unsignedinteger";
    case Category::integer: return "integer";
    case Category::number: return "number";
    case Category::generic: return "generic";
  }
  return "?";
}

using DtypeOrCategory = std::variant<Dtype, Category>;

bool kind_matches(Dtype t, const std::string& kind) {
  if (kind == "bool") return t == bool_;
  if (kind == "signed integer") return is_signed_integer(t);
  if (kind == "unsigned integer") return is_unsigned(t);
  if (kind == "integral") return is_integer(t);
  if (kind == "real floating") return is_floating_point(t);
  if (kind == "complex floating") return is_complex(t);
  if (kind == "numeric") return t != bool_;
  throw std::invalid_argument("[isdtype] unknown kind '" + kind + "'");
}

// Arrays in a tree of lists, tuples and dicts (other leaves ignored).
void collect_arrays(nb::handle tree, std::vector<array>& out, const char* op) {
  for_each_leaf(tree, op, [&](nb::handle leaf) {
    if (nb::isinstance<array>(leaf)) out.push_back(nb::cast<array>(leaf));
  });
}

struct PyStreamContext {
  StreamOrDevice s;
  std::unique_ptr<StreamContext> ctx;
};

// finfo or iinfo: made from a dtype of its kind, with bits, min, max, dtype
// and a repr "finfo(min=..., max=..., dtype=float32)".
template <typename Info>
nb::class_<Info> bind_info(nb::module_& m, const char* name, bool (*of_kind)(Dtype),
                           const char* kind) {
  return nb::class_<Info>(m, name)
      .def("__init__", [name, of_kind, kind](Info* self, const Dtype& t) {
        if (!of_kind(t)) {
          throw std::invalid_argument(std::string("[") + name + "] " + dtype_name(t) +
                                      " is not " + kind + " dtype");
        }
        new (self) Info(t);
      }, "dtype"_a)
      .def_ro("bits", &Info::bits)
      .def_ro("min", &Info::min)
      .def_ro("max", &Info::max)
      .def_ro("dtype", &Info::dtype)
      .def("__repr__", [name](const Info& f) {
        std::ostringstream os;
        os << name << "(min=" << f.min << ", max=" << f.max << ", dtype=" << dtype_name(f.dtype)
           << ")";
        return os.str();
      });
}

}  // namespace

void init_dtypes(nb::module_& m) {
  nb::class_<Dtype>(m, "Dtype", "An element type (not constructible; use tessera.core.float32 etc.)")
      .def_prop_ro("size", [](const Dtype& t) { return static_cast<int>(t.size); },
                   "bytes per element")
      .def("__eq__", [](const Dtype& a, nb::handle b) {
        return nb::isinstance<Dtype>(b) && nb::cast<Dtype>(b) == a;
      })
      .def("__ne__", [](const Dtype& a, nb::handle b) {
        return !(nb::isinstance<Dtype>(b) && nb::cast<Dtype>(b) == a);
      })
      .def("__hash__", [](const Dtype& t) { return static_cast<int>(t.val); })
      .def("__repr__", &dtype_repr)
      .def("__reduce__", [](const Dtype& t) {
        return nb::make_tuple(nb::module_::import_("tessera").attr("_dtype_from_name"),
                              nb::make_tuple(dtype_name(t)));
      });
  for (Dtype t : all_dtypes) {
    std::string n = dtype_name(t);
    m.attr((n == "bool" ? std::string("bool_") : n).c_str()) = t;
  }

  auto cat = nb::enum_<Category>(m, "DtypeCategory");
  for (Category c : {complexfloating, floating, inexact, signedinteger, unsignedinteger, integer,
                     number, generic}) {
    cat.value(category_name(c), c);
    m.attr(category_name(c)) = c;
  }

  def_named(m, "issubdtype",
        [](const DtypeOrCategory& a, const DtypeOrCategory& b) {
          return std::visit([](const auto& x, const auto& y) { return issubdtype(x, y); }, a, b);
        },
        "arg1"_a, "arg2"_a);
  def_named(m, "isdtype",
        [](const Dtype& t, nb::handle kind) {
          auto one = [&](nb::handle k) {
            if (nb::isinstance<Dtype>(k)) return nb::cast<Dtype>(k) == t;
            if (nb::isinstance<nb::str>(k)) return kind_matches(t, nb::cast<std::string>(k));
            throw nb::type_error("[isdtype] kind must be a Dtype, a string or a tuple of them");
          };
          if (nb::isinstance<nb::tuple>(kind)) {
            for (nb::handle k : kind)
              if (one(k)) return true;
            return false;
          }
          return one(kind);
        },
        "dtype"_a, "kind"_a);
  def_named(m, "result_type",
        [](nb::args args) {
          if (args.size() == 0) throw std::invalid_argument("[result_type] needs at least one input");
          std::optional<Dtype> t;
          for (nb::handle a : args) {
            Dtype d = nb::isinstance<Dtype>(a) ? nb::cast<Dtype>(a) : to_array(a).dtype();
            t = t ? promote_types(*t, d) : d;
          }
          return *t;
        });
  def_named(m, "can_cast",
        [](nb::handle from, const Dtype& to) {
          Dtype f = nb::isinstance<Dtype>(from) ? nb::cast<Dtype>(from) : to_array(from).dtype();
          return promote_types(f, to) == to;
        },
        "from_"_a, "to"_a);

  bind_info<finfo>(m, "finfo", is_inexact, "an inexact")
      .def_ro("eps", &finfo::eps)
      .def_ro("smallest_normal", &finfo::smallest_normal);
  bind_info<iinfo>(m, "iinfo", is_integer, "an integer");

  m.attr("pi") = M_PI;
  m.attr("e") = M_E;
  m.attr("euler_gamma") = 0.5772156649015329;
  m.attr("inf") = INFINITY;
  m.attr("nan") = NAN;
  m.attr("newaxis") = nb::none();
  m.attr("__version__") = "0.1.0";
}

void init_devices(nb::module_& m) {
  nb::enum_<Device::DeviceType>(m, "DeviceType")
      .value("cpu", Device::cpu)
      .value("gpu", Device::gpu);
  m.attr("cpu") = Device::cpu;
  m.attr("gpu") = Device::gpu;

  nb::class_<Device>(m, "Device")
      .def(nb::init<Device::DeviceType, int>(), "type"_a, "index"_a = 0)
      .def_ro("type", &Device::type)
      .def_ro("index", &Device::index)
      .def("__eq__", [](const Device& d, nb::handle o) {
        if (nb::isinstance<Device>(o)) return nb::cast<Device>(o) == d;
        if (nb::isinstance<Device::DeviceType>(o)) return Device(nb::cast<Device::DeviceType>(o)) == d;
        return false;
      })
      .def("__hash__", [](const Device& d) { return static_cast<int>(d.type) * 1024 + d.index; })
      .def("__repr__", [](const Device& d) {
        std::ostringstream os;
        os << "Device(" << (d.type == Device::cpu ? "cpu" : "gpu") << ", " << d.index << ")";
        return os.str();
      });
  nb::implicitly_convertible<Device::DeviceType, Device>();

  nb::class_<ThreadLocalStream>(m, "ThreadLocalStream",
                                "Stands for one stream per thread (new_thread_local_stream); "
                                "accepted wherever a Stream is.")
      .def_ro("device", &ThreadLocalStream::device)
      .def("__eq__", [](const ThreadLocalStream& s, nb::handle o) {
        return nb::isinstance<ThreadLocalStream>(o) && nb::cast<ThreadLocalStream>(o) == s;
      })
      .def("__hash__", [](const ThreadLocalStream& s) { return s.index; })
      .def("__repr__", [](const ThreadLocalStream& s) {
        std::ostringstream os;
        os << "ThreadLocalStream(" << s.device << ", " << s.index << ")";
        return os.str();
      });

  nb::class_<Stream>(m, "Stream")
      // Only the implicit conversion: the calling thread's stream of the handle.
      .def("__init__", [](Stream* s, const ThreadLocalStream& t) { new (s) Stream(t.stream()); },
           "stream"_a)
      .def_ro("device", &Stream::device)
      .def_ro("index", &Stream::index)
      .def("__eq__", [](const Stream& s, nb::handle o) {
        return nb::isinstance<Stream>(o) && nb::cast<Stream>(o) == s;
      })
      .def("__hash__", [](const Stream& s) { return s.index; })
      .def("__repr__", [](const Stream& s) {
        std::ostringstream os;
        os << "Stream(Device(" << (s.device.type == Device::cpu ? "cpu" : "gpu") << ", "
           << s.device.index << "), " << s.index << ")";
        return os.str();
      });

  nb::implicitly_convertible<ThreadLocalStream, Stream>();

  def_named(m, "default_device", &default_device);
  def_named(m, "set_default_device", &set_default_device, "device"_a);
  def_named(m, "is_available", [](const Device& d) { return is_available(d); }, "device"_a);
  def_named(m, "device_count", &device_count, "device_type"_a);
  def_named(m, "device_info",
        [](std::optional<Device> d) {
          Device dev = d.value_or(default_device());
          nb::dict out;
          if (dev.type == Device::gpu) {
            for (auto& [k, v] : gpu::device_info(dev.index)) {
              std::visit([&](auto& x) { out[k.c_str()] = x; }, v);
            }
          } else {
            out["device_name"] = "cpu";
            out["architecture"] = "cpu";
          }
          return out;
        },
        "d"_a = nb::none());
  def_named(m, "default_stream", &default_stream, "device"_a);
  def_named(m, "set_default_stream", &set_default_stream, "stream"_a);
  def_named(m, "new_stream", &new_stream, "device"_a);
  def_named(m, "new_thread_unsafe_stream", &new_thread_unsafe_stream, "device"_a,
        "A new stream that any thread may use (the caller orders their work).");
  def_named(m, "new_thread_local_stream", &new_thread_local_stream, "device"_a,
        "A handle that resolves to a stream of its own in each thread.");
  def_named(m, "clear_streams", &clear_streams,
        "Forgets the streams made on this thread (after their work is done).");
  def_named(m, "synchronize",
        [](std::optional<Stream> s) {
          nb::gil_scoped_release nogil;
          if (s) synchronize(*s);
          else synchronize(default_stream(default_device()));
        },
        "stream"_a = nb::none());

  nb::class_<PyStreamContext>(m, "StreamContext")
      .def("__enter__", [](PyStreamContext& c) { c.ctx = std::make_unique<StreamContext>(c.s); })
      .def("__exit__", [](PyStreamContext& c, nb::args) { c.ctx.reset(); });
  def_named(m, "stream",
        [](nb::handle s) {
          if (s.is_none()) throw std::invalid_argument("[stream] needs a Stream or a Device, not None");
          auto* c = new PyStreamContext{nb::cast<StreamOrDevice>(s), nullptr};
          return c;
        },
        "s"_a.none(), nb::rv_policy::take_ownership);

  nb::class_<PrintOptions>(m, "PrintOptions").def_ro("precision", &PrintOptions::precision);
  def_named(m, "set_printoptions", [](std::optional<int64_t> precision) {
    // Beyond int's range: the largest int, which set_printoptions refuses too.
    int64_t p = precision.value_or(get_printoptions().precision);
    set_printoptions(static_cast<int>(std::clamp<int64_t>(p, -1, INT32_MAX)));
  }, "precision"_a = nb::none());
  def_named(m, "get_printoptions", &get_printoptions);

  def_named(m, "eval", [](nb::args args) {
    std::vector<array> outs;
    collect_arrays(args, outs, "eval");
    nb::gil_scoped_release nogil;
    eval(std::move(outs));
  });
  def_named(m, "async_eval", [](nb::args args) {
    std::vector<array> outs;
    collect_arrays(args, outs, "async_eval");
    nb::gil_scoped_release nogil;
    async_eval(std::move(outs));
  });

  auto cuda = m.def_submodule("cuda", "CUDA helpers");
  cuda.def("is_available", [] { return gpu::device_count() > 0; });
}

}  // namespace tessera::python
