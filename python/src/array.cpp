// The array class: construction, properties, Python protocols, operators,
// NumPy (buffer protocol, __array__), DLPack and pickling.
#include <nanobind/ndarray.h>
#include <nanobind/make_iterator.h>

#include <cstddef>
#include <sstream>

#include "convert.h"

namespace tessera::python {

namespace {

const char* buffer_format(Dtype t) {
  switch (t.val) {
    case Dtype::Val::bool_: return "?";
    case Dtype::Val::uint8: return "B";
    case Dtype::Val::uint16: return "H";
    case Dtype::Val::uint32: return "I";
    case Dtype::Val::uint64: return "Q";
    case Dtype::Val::int8: return "b";
    case Dtype::Val::int16: return "h";
    case Dtype::Val::int32: return "i";
    case Dtype::Val::int64: return "q";
    case Dtype::Val::float16: return "e";
    case Dtype::Val::bfloat16: return nullptr;
    case Dtype::Val::float32: return "f";
    case Dtype::Val::float64: return "d";
    case Dtype::Val::complex64: return "Zf";
  }
  return nullptr;
}

// The buffer protocol: a view of the evaluated array's memory, which the view keeps alive.
struct BufferInfo {
  array keep;
  std::vector<Py_ssize_t> shape, strides;
};

int array_getbuffer(PyObject* obj, Py_buffer* view, int flags) {
  try {
    array a = nb::cast<array>(nb::handle(obj));
    const char* fmt = buffer_format(a.dtype());
    if (!fmt) {
      PyErr_SetString(PyExc_BufferError,
                      "[array] bfloat16 has no buffer format; convert with astype first");
      return -1;
    }
    {
      nb::gil_scoped_release nogil;
      a.eval();
      if ((flags & PyBUF_STRIDES) != PyBUF_STRIDES && !a.flags().row_contiguous) {
        a = contiguous(a);
        a.eval();
      }
    }
    const bool read_only = host_view_read_only(a);
    if (read_only && (flags & PyBUF_WRITABLE)) {
      PyErr_SetString(PyExc_BufferError, "[array] a writable view was asked of a read-only array");
      return -1;
    }
    auto* info = new BufferInfo{a, {}, {}};
    for (size_t i = 0; i < a.ndim(); ++i) {
      info->shape.push_back(a.shape()[i]);
      info->strides.push_back(a.strides()[i] * static_cast<Py_ssize_t>(a.itemsize()));
    }
    view->buf = !a.size() ? nullptr : read_only ? info->keep.raw_data() : info->keep.mutable_data();
    view->obj = obj;
    Py_INCREF(obj);
    view->len = static_cast<Py_ssize_t>(a.nbytes());
    view->itemsize = static_cast<Py_ssize_t>(a.itemsize());
    view->readonly = read_only;
    view->ndim = static_cast<int>(a.ndim());
    view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>(fmt) : nullptr;
    view->shape = info->shape.data();
    view->strides = info->strides.data();
    view->suboffsets = nullptr;
    view->internal = info;
    return 0;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_BufferError, e.what());
    return -1;
  }
}

void array_releasebuffer(PyObject*, Py_buffer* view) {
  delete static_cast<BufferInfo*>(view->internal);
}

PyType_Slot array_slots[] = {
    {Py_bf_getbuffer, reinterpret_cast<void*>(array_getbuffer)},
    {Py_bf_releasebuffer, reinterpret_cast<void*>(array_releasebuffer)},
    {0, nullptr}};

std::string repr(const array& a) {
  std::ostringstream os;
  {
    array x = a;
    nb::gil_scoped_release nogil;
    x.eval();
  }
  os << a;
  return os.str();
}

// Binary operators: array-like operands, weak scalars (MLX's weak-scalar rule).
// Their errors name the op (Note [Errors name the function called]).
template <typename F>
auto binary(F f, const char* op) {
  return named(op, [f](const array& a, nb::handle b) {
    return f(a, operand_with(a, b), StreamOrDevice{});
  });
}
template <typename F>
auto rbinary(F f, const char* op) {
  return named(op, [f](const array& a, nb::handle b) {
    return f(operand_with(a, b), a, StreamOrDevice{});
  });
}
template <typename F>
auto inplace(F f, const char* op) {
  return named(op, [f](nb::object self, nb::handle b) {
    array& a = nb::cast<array&>(self);
    a = f(a, operand_with(a, b), StreamOrDevice{});
    return self;
  });
}

void check_bitwise(const array& a, nb::handle b, const char* op) {
  Dtype bt = nb::isinstance<array>(b) ? nb::cast<const array&>(b).dtype()
             : PyFloat_Check(b.ptr()) || PyComplex_Check(b.ptr()) ? float32 : int32;
  if (is_inexact(a.dtype()) || is_inexact(bt)) {
    throw std::invalid_argument(std::string("[") + op + "] bitwise operations need integer or bool operands, not " +
                                dtype_name(is_inexact(a.dtype()) ? a.dtype() : bt));
  }
}

template <typename F>
auto bitwise(F f, const char* op) {
  return [f, op](const array& a, nb::handle b) {
    check_bitwise(a, b, op);
    return f(a, operand_with(a, b), StreamOrDevice{});
  };
}
template <typename F>
auto ibitwise(F f, const char* op) {
  return [f, op](nb::object self, nb::handle b) {
    array& a = nb::cast<array&>(self);
    check_bitwise(a, b, op);
    a = f(a, operand_with(a, b), StreamOrDevice{});
    return self;
  };
}

#define TESSERA_OP(fn) [](const array& a, const array& b, StreamOrDevice s) { return fn(a, b, s); }

array matmul_operand(nb::handle b) {
  if (!nb::isinstance<array>(b)) {
    throw std::invalid_argument("[matmul] both operands of @ must be arrays");
  }
  return nb::cast<array>(b);
}

array idivide(const array& a, const array& b, StreamOrDevice s) {
  if (!is_inexact(a.dtype())) {
    throw std::invalid_argument("[divide] /= needs an inexact (floating or complex) array, not " +
                                dtype_name(a.dtype()));
  }
  return divide(a, b, s);
}

// Note [Operator slots]
// x + y with an array operand is the hot path of eager-style code. CPython's
// generic slot looks __add__ up by name and calls it through nanobind's
// overload dispatch. The number slots below call the op at once when both
// operands are arrays, or one is an array and the other a Python scalar (the
// conversion of the bound methods: operand_with). Otherwise, and when the op
// throws, they do what the generic slot does: x.__add__(y), then y.__radd__(x)
// if that is not implemented; so results and errors are the methods'.
PyTypeObject* g_array_type = nullptr;

bool is_array_object(PyObject* o) { return Py_TYPE(o) == g_array_type && nb::inst_ready(o); }

binaryfunc& number_slot(PyTypeObject* t, size_t offset) {
  return *reinterpret_cast<binaryfunc*>(reinterpret_cast<char*>(t->tp_as_number) + offset);
}

// type(self).<name>(self, other), or NotImplemented where the type has no such method.
PyObject* call_method(PyObject* name, PyObject* self, PyObject* other) {
  PyObject* f = PyObject_GetAttr(reinterpret_cast<PyObject*>(Py_TYPE(self)), name);
  if (!f) {
    PyErr_Clear();
    Py_RETURN_NOTIMPLEMENTED;
  }
  PyObject* args[] = {self, other};
  PyObject* r = PyObject_Vectorcall(f, args, 2, nullptr);
  Py_DECREF(f);
  return r;
}

template <typename F, size_t Offset>
struct NumberSlot {
  static inline PyObject* name = nullptr;
  static inline PyObject* rname = nullptr;

  static PyObject* fast(PyObject* x, PyObject* y) {
    bool xa = is_array_object(x), ya = is_array_object(y);
    if (!(xa && (ya || is_python_scalar(y))) && !(ya && is_python_scalar(x))) return nullptr;
    try {
      if (xa) {
        const array& a = *nb::inst_ptr<array>(x);
        return nb::cast(F{}(a, operand_with(a, y), StreamOrDevice{})).release().ptr();
      }
      const array& b = *nb::inst_ptr<array>(y);
      return nb::cast(F{}(operand_with(b, x), b, StreamOrDevice{})).release().ptr();
    } catch (...) {
      if (PyErr_Occurred()) PyErr_Clear();
      return nullptr;  // the methods raise the error
    }
  }

  static PyObject* call(PyObject* x, PyObject* y) {
    if (PyObject* r = fast(x, y)) return r;
    auto has = [](PyObject* o) { return Py_TYPE(o)->tp_as_number && number_slot(Py_TYPE(o), Offset) == &call; };
    bool other = Py_TYPE(x) != Py_TYPE(y) && has(y);
    if (has(x)) {
      PyObject* r = call_method(name, x, y);
      if (r != Py_NotImplemented || Py_TYPE(x) == Py_TYPE(y)) return r;
      Py_DECREF(r);
    }
    if (other) return call_method(rname, y, x);
    Py_RETURN_NOTIMPLEMENTED;
  }

  // After the methods are bound: binding __add__ sets the generic slot.
  static void install(PyTypeObject* t, const char* n, const char* rn) {
    name = PyUnicode_InternFromString(n);
    rname = PyUnicode_InternFromString(rn);
    number_slot(t, Offset) = &call;
  }
};

#define TESSERA_NUMBER_SLOT(SLOT, fn, NAME)                                              \
  NumberSlot<decltype(TESSERA_OP(fn)), offsetof(PyNumberMethods, SLOT)>::install(        \
      type, "__" NAME "__", "__r" NAME "__")

void install_number_slots(PyTypeObject* type) {
  g_array_type = type;
  TESSERA_NUMBER_SLOT(nb_add, add, "add");
  TESSERA_NUMBER_SLOT(nb_subtract, subtract, "sub");
  TESSERA_NUMBER_SLOT(nb_multiply, multiply, "mul");
  TESSERA_NUMBER_SLOT(nb_true_divide, divide, "truediv");
  TESSERA_NUMBER_SLOT(nb_floor_divide, floor_divide, "floordiv");
  TESSERA_NUMBER_SLOT(nb_remainder, remainder, "mod");
}

// Iterates over the first axis of an array: its items are a[0], a[1], ...
struct ArrayIterator {
  explicit ArrayIterator(const array& a) : a(a) {
    if (a.ndim() == 0) throw nb::type_error("iteration over a 0-d array");
  }
  array next() {
    if (i >= a.shape(0)) throw nb::stop_iteration();
    return *array::ArrayIterator(a, i++);
  }
  array a;
  int i = 0;
};

struct ArrayLikeTag {};

nb::object pickle_state(const array& a) {
  if (a.dtype() == bfloat16) return nb::make_tuple(to_numpy(view(a, uint16)), "bfloat16");
  return nb::make_tuple(to_numpy(a), dtype_name(a.dtype()));
}

}  // namespace

ArrayClass init_array(nb::module_& m) {
  nb::class_<ArrayIterator>(m, "ArrayIterator",
                            "A helper object to iterate over the first axis of an array.")
      .def(nb::init<const array&>(), "a"_a)
      .def("__iter__", [](nb::handle self) { return self; })
      .def("__next__", &ArrayIterator::next)
      .def("__length_hint__", [](const ArrayIterator& it) { return it.a.shape(0) - it.i; });
  // What type annotations name for any object with an __mlx_array__ (or
  // __tessera_array__) method that returns an array.
  nb::class_<ArrayLikeTag>(m, "ArrayLike",
                           "Any Python object which has an ``__mlx_array__`` method that "
                           "returns an :obj:`array`.")
      .def("__init__", [](ArrayLikeTag* self, nb::args) { new (self) ArrayLikeTag(); });
  ArrayClass cls(m, "array", nb::type_slots(array_slots), nb::is_weak_referenceable(),
                 "An N-dimensional array (lazy: its value is computed when needed)");
  cls.def("__init__",
          [](array* self, nb::handle val, std::optional<Dtype> dtype) {
            new (self) array(to_array(val, dtype));
          },
          "val"_a, "dtype"_a = nb::none())
      .def_prop_ro("shape", [](const array& a) {
        nb::list l;
        for (auto d : a.shape()) l.append(d);
        return nb::tuple(l);
      })
      .def_prop_ro("dtype", &array::dtype)
      .def_prop_ro("size", &array::size)
      .def_prop_ro("ndim", &array::ndim)
      .def_prop_ro("itemsize", &array::itemsize)
      .def_prop_ro("nbytes", &array::nbytes)
      .def_prop_ro("T", [](const array& a) { return transpose(a); })
      .def_prop_ro("real", [](const array& a) { return real(a); })
      .def_prop_ro("imag", [](const array& a) { return imag(a); })
      .def("item", &item)
      .def("tolist", &tolist)
      .def("__repr__", &repr)
      .def("__str__", &repr)
      .def("__len__", [](const array& a) {
        if (a.ndim() == 0) throw nb::type_error("len() of a 0-d array");
        return a.shape()[0];
      })
      .def("__iter__", [](const array& a) { return ArrayIterator(a); })
      .def("__bool__", [](const array& a) { return nb::bool_(item(a)); })
      .def("__int__", [](const array& a) { return nb::int_(item(a)); })
      .def("__index__", [](const array& a) {
        if (!is_integer(a.dtype())) throw nb::type_error("only integer arrays can be used as an index");
        return nb::int_(item(a));
      })
      .def("__float__", [](const array& a) { return nb::float_(item(a)); })
      .def("__complex__", [](const array& a) { return nb::module_::import_("builtins").attr("complex")(item(a)); })
      .def("__format__", [](const array& a, const std::string& spec) {
        if (spec.empty()) return nb::str(nb::cast(repr(a)));
        if (a.ndim() != 0) throw nb::type_error("[array] a format spec needs a 0-d array");
        return nb::str(nb::module_::import_("builtins").attr("format")(item(a), spec));
      })
      .def("__copy__", [](const array& a) { return array(a); })
      .def("__deepcopy__", [](const array& a, nb::handle) { return array(a); }, "memo"_a)
      .def("__array_namespace__", [](const array&, nb::handle) {
        return nb::module_::import_("tessera.core");
      }, "api_version"_a = nb::none())
      .def("__array__", [](const array& a, nb::handle dtype, nb::handle copy) {
        return to_numpy(a, dtype.is_none() ? std::nullopt : std::optional<nb::handle>(dtype));
      }, "dtype"_a = nb::none(), "copy"_a = nb::none())
      .def("__dlpack__", &to_dlpack, nb::kw_only(), "stream"_a = nb::none(),
           "max_version"_a = nb::none(), "dl_device"_a = nb::none(), "copy"_a = nb::none())
      .def("__dlpack_device__", &dlpack_device)
      .def("__getstate__", &pickle_state)
      .def("__setstate__", [](array& self, nb::tuple state) {
        array a = to_array(state[0]);
        std::string name = nb::cast<std::string>(state[1]);
        if (name == "bfloat16") a = view(a, bfloat16);
        new (&self) array(a);
      })
      .def("astype", [](const array& a, Dtype t, StreamArg s) { return astype(a, t, s); },
           "dtype"_a, "stream"_a = nb::none());

  // Operators.
  cls.def("__add__", binary(TESSERA_OP(add), "add"))
      .def("__radd__", rbinary(TESSERA_OP(add), "add"), "other"_a.none())
      .def("__iadd__", inplace(TESSERA_OP(add), "add"), "other"_a.none())
      .def("__sub__", binary(TESSERA_OP(subtract), "subtract"), "other"_a.none())
      .def("__rsub__", rbinary(TESSERA_OP(subtract), "subtract"), "other"_a.none())
      .def("__isub__", inplace(TESSERA_OP(subtract), "subtract"), "other"_a.none())
      .def("__mul__", binary(TESSERA_OP(multiply), "multiply"), "other"_a.none())
      .def("__rmul__", rbinary(TESSERA_OP(multiply), "multiply"), "other"_a.none())
      .def("__imul__", inplace(TESSERA_OP(multiply), "multiply"), "other"_a.none())
      .def("__truediv__", binary(TESSERA_OP(divide), "divide"), "other"_a.none())
      .def("__rtruediv__", rbinary(TESSERA_OP(divide), "divide"), "other"_a.none())
      .def("__itruediv__", inplace(idivide, "divide"), "other"_a.none())
      .def("__floordiv__", binary(TESSERA_OP(floor_divide), "floor_divide"), "other"_a.none())
      .def("__rfloordiv__", rbinary(TESSERA_OP(floor_divide), "floor_divide"), "other"_a.none())
      .def("__ifloordiv__", inplace(TESSERA_OP(floor_divide), "floor_divide"), "other"_a.none())
      .def("__mod__", binary(TESSERA_OP(remainder), "remainder"), "other"_a.none())
      .def("__rmod__", rbinary(TESSERA_OP(remainder), "remainder"), "other"_a.none())
      .def("__imod__", inplace(TESSERA_OP(remainder), "remainder"), "other"_a.none())
      .def("__pow__", binary(TESSERA_OP(power), "power"), "other"_a.none())
      .def("__rpow__", rbinary(TESSERA_OP(power), "power"), "other"_a.none())
      .def("__ipow__", inplace(TESSERA_OP(power), "power"), "other"_a.none())
      .def("__divmod__", [](const array& a, nb::handle b) {
        auto r = divmod(a, operand_with(a, b));
        return nb::make_tuple(r[0], r[1]);
      })
      .def("__rdivmod__", [](const array& a, nb::handle b) {
        auto r = divmod(operand_with(a, b), a);
        return nb::make_tuple(r[0], r[1]);
      })
      .def("__matmul__", [](const array& a, nb::handle b) { return matmul(a, matmul_operand(b)); })
      .def("__rmatmul__", [](const array& a, nb::handle b) { return matmul(matmul_operand(b), a); })
      .def("__imatmul__", [](nb::object self, nb::handle b) {
        array& a = nb::cast<array&>(self);
        a = matmul(a, matmul_operand(b));
        return self;
      })
      .def("__lt__", binary(TESSERA_OP(less), "less"), "other"_a.none())
      .def("__le__", binary(TESSERA_OP(less_equal), "less_equal"), "other"_a.none())
      .def("__gt__", binary(TESSERA_OP(greater), "greater"), "other"_a.none())
      .def("__ge__", binary(TESSERA_OP(greater_equal), "greater_equal"), "other"_a.none())
      .def("__eq__", [](const array& a, nb::handle b) -> nb::object {
        if (!is_array_like(b)) return nb::bool_(false);
        return nb::cast(equal(a, operand_with(a, b)));
      }, "other"_a.none())
      .def("__ne__", [](const array& a, nb::handle b) -> nb::object {
        if (!is_array_like(b)) return nb::bool_(true);
        return nb::cast(not_equal(a, operand_with(a, b)));
      }, "other"_a.none())
      .def("__neg__", [](const array& a) {
        if (a.dtype() == bool_) throw std::invalid_argument("[negative] not supported for bool arrays");
        return negative(a);
      })
      .def("__abs__", [](const array& a) { return abs(a); })
      .def("__invert__", [](const array& a) {
        if (is_inexact(a.dtype())) {
          throw std::invalid_argument("[bitwise_invert] needs an integer or bool array, not " +
                                      dtype_name(a.dtype()));
        }
        return a.dtype() == bool_ ? logical_not(a) : bitwise_invert(a);
      })
      .def("__and__", bitwise(TESSERA_OP(bitwise_and), "bitwise_and"), "other"_a.none())
      .def("__iand__", ibitwise(TESSERA_OP(bitwise_and), "bitwise_and"), "other"_a.none())
      .def("__or__", bitwise(TESSERA_OP(bitwise_or), "bitwise_or"), "other"_a.none())
      .def("__ior__", ibitwise(TESSERA_OP(bitwise_or), "bitwise_or"), "other"_a.none())
      .def("__xor__", bitwise(TESSERA_OP(bitwise_xor), "bitwise_xor"), "other"_a.none())
      .def("__ixor__", ibitwise(TESSERA_OP(bitwise_xor), "bitwise_xor"), "other"_a.none())
      .def("__lshift__", bitwise(TESSERA_OP(left_shift), "left_shift"), "other"_a.none())
      .def("__ilshift__", ibitwise(TESSERA_OP(left_shift), "left_shift"), "other"_a.none())
      .def("__rshift__", bitwise(TESSERA_OP(right_shift), "right_shift"), "other"_a.none())
      .def("__irshift__", ibitwise(TESSERA_OP(right_shift), "right_shift"), "other"_a.none());
  cls.attr("__hash__") = nb::none();
  install_number_slots(reinterpret_cast<PyTypeObject*>(cls.ptr()));  // Note [Operator slots]

  // array() copies; asarray and from_dlpack share the memory
  // of a DLPack producer when they can (see Note [Borrowed memory]).
  def(m, "asarray",
        [](nb::handle a, std::optional<Dtype> dtype, std::optional<bool> copy) {
          const bool is_array = nb::isinstance<array>(a);
          if (copy == false) {
            auto r = is_array ? std::nullopt : import_dlpack(a, false, "asarray");
            if (!r || (dtype && *dtype != r->dtype())) {
              throw std::invalid_argument(
                  "[asarray] copy=False, but a copy is needed for an object of type " +
                  std::string(nb::type_name(a.type()).c_str()) +
                  (r ? " to become " + dtype_name(*dtype) : std::string()));
            }
            return *r;
          }
          if (is_array) {
            array r = to_array(a, dtype);
            return copy == true && r.is_same(nb::cast<const array&>(a)) ? tessera::copy(r) : r;
          }
          if (auto r = import_dlpack(a, copy, "asarray")) {
            if (!dtype || *dtype == r->dtype()) return *r;
            // A copy, made now: later writes of the source stay out of it.
            array cast = astype(*r, *dtype);
            nb::gil_scoped_release nogil;
            cast.eval();
            return cast;
          }
          return to_array(a, dtype);
        },
        "a"_a, pos_only(), "dtype"_a = nb::none(), nb::kw_only(), "copy"_a = nb::none());
  // copy arrives as a handle: GCC 12 reports nanobind's caster of an
  // optional<bool> here as maybe uninitialized (-Wmaybe-uninitialized).
  def(m, "from_dlpack",
        [](nb::handle x, nb::handle copy_arg) {
          std::optional<bool> copy;
          if (!copy_arg.is_none()) copy = nb::cast<bool>(copy_arg);
          if (auto a = import_dlpack(x, copy, "from_dlpack")) return *a;
          if (nb::hasattr(x, "__dlpack__") && copy != false) {
            if (auto a = from_buffer(x)) return *a;  // a producer that refused to export
          }
          throw std::invalid_argument("[from_dlpack] an object of type " +
                                      std::string(nb::type_name(x.type()).c_str()) +
                                      " has no usable __dlpack__");
        },
        "x"_a, pos_only(), nb::kw_only(), "copy"_a = nb::none());
  return cls;
}

}  // namespace tessera::python
