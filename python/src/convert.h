// Shared by the binding files of tessera.core: Python values to arrays (with the
// reference's weak-scalar rules), arrays to Python values, and the argument
// types that many bindings take.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "tessera/tessera.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace tessera::python {

// Axes = None | int | Sequence[int]
using IntOrVec = std::variant<int, std::vector<int>>;
using Axes = std::optional<IntOrVec>;
// The trailing keyword-only stream argument: None, Stream, Device or DeviceType.
using StreamArg = StreamOrDevice;

// A Python callable held by C++ (in a graph node released on a worker thread,
// or an exporter that outlives the call that made it): its reference is
// dropped under the GIL.
struct PyFn {
  nb::object f;
  explicit PyFn(nb::object fn) : f(std::move(fn)) {}
  ~PyFn() {
    if (!Py_IsInitialized()) {
      f.release();  // the interpreter is gone: nothing left to release it to
      return;
    }
    nb::gil_scoped_acquire gil;
    f.reset();
  }
};

// Any ArrayLike (array, scalar, nested list/tuple, NumPy/DLPack/buffer object,
// object with __tessera_array__ or __mlx_array__) to an array, cast to dtype if given.
array to_array(nb::handle v, std::optional<Dtype> dtype = std::nullopt);
// Each element of an iterable (list, tuple, *args) through to_array.
std::vector<array> to_array_list(nb::handle seq);
// None -> nullopt, anything else through to_array.
std::optional<array> optional_array(nb::handle v);
// A path given as str, bytes or os.PathLike (os.fsencode'd); nullopt for anything else.
std::optional<std::string> as_path(nb::handle file);
// A Python scalar to an array, taking the other operand's dtype as the hint
// (MLX's weak-scalar rule).
array scalar_to_array(nb::handle v, Dtype hint);
bool is_python_scalar(nb::handle v);
// Two operands of a binary op: an array and a scalar follow the weak-scalar rule,
// two scalars convert independently. A scalar beside an array becomes a cached
// constant (Note [Scalar operands] in core/array.h): pass the result to an op,
// never back to the caller.
std::pair<array, array> to_arrays(nb::handle a, nb::handle b);
// The other operand of a binary op whose one operand is the array a (a scalar:
// a cached constant, as for to_arrays).
array operand_with(const array& a, nb::handle b);
// True for objects to_array accepts.
bool is_array_like(nb::handle v);

// Evaluated values back to Python.
nb::object item(const array& a);
nb::object tolist(const array& a);
// A NumPy array sharing the array's memory (bfloat16 becomes float32, a copy).
nb::object to_numpy(const array& a, std::optional<nb::handle> dtype = std::nullopt);
// Host views of an evaluated array (NumPy, the buffer protocol, DLPack) are
// read-only for a broadcast (one element at many indices) and for memory whose
// device copy another library owns (Tessera could not order the upload of a
// write with that library's work).
bool host_view_read_only(const array& x);
// A row-contiguous host copy of an ndarray-like object (NumPy, DLPack, buffer).
std::optional<array> from_buffer(nb::handle v);

// DLPack (dlpack.cpp). __dlpack__: a capsule over the array's host or device
// memory (no copy unless `copy` or a negative stride asks for one; the capsule
// keeps the memory alive), ordered before the consumer's `stream`.
nb::object to_dlpack(const array& a, nb::handle stream, nb::handle max_version,
                     nb::handle dl_device, nb::handle copy);
// __dlpack_device__: (2, 0) for CUDA when the array's data is on the GPU or
// the GPU is the default device, else (1, 0).
nb::tuple dlpack_device(const array& a);
// The array over the memory of a DLPack producer (host or CUDA) without a
// copy, or a copy when `copy` is true; nullopt when x is not a producer (or
// refuses to export and a copy is allowed). `op` names the caller in errors.
std::optional<array> import_dlpack(nb::handle x, std::optional<bool> copy, const char* op);
// A copy of elements that another library owns (on the host, or the GPU), made
// now; `release` hands the memory back once it is read.
array copy_of(void* first, const Shape& shape, Strides strides, Dtype dtype, Device device,
              std::function<void()> release);
// Runs f (which may need the GIL) on a thread holding the GIL: see Note [DLPack deleters].
void release_with_gil(std::function<void()> f);
// DLPack element types.
std::optional<Dtype> dlpack_dtype(nb::dlpack::dtype t);
nb::dlpack::dtype to_dlpack_dtype(Dtype t);
// Copies a strided block of elements (strides in elements) to a row-contiguous destination.
void strided_copy(const char* src, char* dst, const int64_t* shape, const int64_t* strides,
                  int ndim, size_t itemsize);

std::vector<int> to_vec(const IntOrVec& v);

// Shape arguments: an int or a sequence of ints, each within int32's range
// (else ValueError naming op).
Shape to_shape(nb::handle v, const char* op);
ShapeElem to_shape_elem(nb::handle v, const char* op);
// A Python int argument in [0, 2^64) / in int32's range, else ValueError
// naming op and the argument.
uint64_t to_uint64(nb::handle v, const char* op, const char* name);
int to_int32(nb::handle v, const char* op, const char* name);

using ArrayClass = nb::class_<array>;

// Note [Positional-only parameters]
// The reference marks leading parameters positional-only ('/', e.g.
// `abs(a, /, *, stream=None)`). nanobind takes every named parameter by
// keyword, so def() binds the parameters before a pos_only() marker unnamed,
// and gives the function the signature nanobind renders for the named
// parameters, with the '/' after them:
//   def(m, "abs", f, "a"_a, pos_only(), nb::kw_only(), "stream"_a = nb::none());
struct pos_only {};
template <typename F>
void func_extra_apply(F&, pos_only, size_t&) {}  // found by ADL from nanobind: no effect

// A signature for nb::sig (alive as long as the module): the first line of a
// docstring that nanobind rendered, with ", /" after its first n parameters.
const char* positional_only_signature(const std::string& doc, size_t n);

// Calls f on each leaf of a tree of lists, tuples and dicts (a dict's values),
// depth first, without recursion: any depth works, and a container that holds
// itself raises std::invalid_argument "[op] the argument contains itself ...".
void for_each_leaf(nb::handle tree, const char* op, const std::function<void(nb::handle)>& f);

// Note [Errors name the function called]
// Converting an argument (to_array, to_shape, ...) reports a bad value under
// "[array]", the conversion's name. A function bound with def() catches such
// an error and gives it its own name instead, so `mx.add(x, None)` says
// "[add] cannot convert an object of type NoneType to an array".
[[noreturn]] void rethrow_named(const char* name);

namespace detail {
template <typename F, typename R, typename... Args>
auto named_errors(const char* name, F f, R (F::*)(Args...) const) {
  return [name, f = std::move(f)](Args... args) -> R {
    try {
      return f(std::forward<Args>(args)...);
    } catch (...) {
      rethrow_named(name);
    }
  };
}

template <typename R, typename... Args>
auto named_errors(const char* name, R (*f)(Args...)) {
  return [name, f](Args... args) -> R {
    try {
      return f(std::forward<Args>(args)...);
    } catch (...) {
      rethrow_named(name);
    }
  };
}

template <typename F>
auto named_errors(const char* name, F f) {
  return named_errors(name, std::move(f), &F::operator());
}

}  // namespace detail

// f, whose conversion errors name `name` (Note [Errors name the function called]).
template <typename F>
auto named(const char* name, F f) {
  return detail::named_errors(name, std::move(f));
}

// m.def(name, named(name, f), extra...)
template <typename Func, typename... Extra>
void def_named(nb::module_& m, const char* name, Func&& f, const Extra&... extra) {
  m.def(name, named(name, std::decay_t<Func>(std::forward<Func>(f))), extra...);
}

namespace detail {
template <bool Unnamed, typename T>
decltype(auto) annotation(const T& e) {
  if constexpr (Unnamed && nb::detail::arg_traits<T>::is_arg) {
    T unnamed = e;
    unnamed.name_ = nullptr;
    return unnamed;
  } else {
    return (e);  // also a docstring (an array)
  }
}

template <typename Func, typename... Extra, size_t... I>
void def_positional(nb::module_& m, const char* name, Func&& f, std::index_sequence<I...>,
                    const Extra&... extra) {
  constexpr size_t marker = [] {
    size_t i = 0;
    ((std::is_same_v<Extra, pos_only> ? false : (++i, true)) && ...);
    return i;
  }();
  constexpr size_t n = ((I < marker && nb::detail::arg_traits<Extra>::is_arg) + ... + 0);
  auto g = named_errors(name, std::decay_t<Func>(std::forward<Func>(f)));
  nb::object named = nb::cpp_function(g, nb::name(name), extra...);
  const char* sig = positional_only_signature(nb::cast<std::string>(named.attr("__doc__")), n);
  m.def(name, std::move(g), nb::sig(sig), annotation<(I < marker)>(extra)...);
}
}  // namespace detail

template <typename Func, typename... Extra>
void def(nb::module_& m, const char* name, Func&& f, const Extra&... extra) {
  detail::def_positional(m, name, std::forward<Func>(f), std::index_sequence_for<Extra...>{},
                         extra...);
}

// One registration function per family (one .cpp file each); a family binds its
// module functions and the array methods of the same names.
void init_dtypes(nb::module_& m);
void init_devices(nb::module_& m);
ArrayClass init_array(nb::module_& m);
void init_indexing(nb::module_& m, ArrayClass& cls);
void init_creation(nb::module_& m, ArrayClass& cls);
void init_elementwise(nb::module_& m, ArrayClass& cls);
void init_reduce(nb::module_& m, ArrayClass& cls);
void init_shape(nb::module_& m, ArrayClass& cls);
void init_matmul(nb::module_& m, ArrayClass& cls);
void init_scan(nb::module_& m, ArrayClass& cls);
void init_sort(nb::module_& m, ArrayClass& cls);
void init_linalg(nb::module_& m);
void init_random(nb::module_& m);
void init_fft(nb::module_& m);
void init_fast(nb::module_& m);
void init_distributed(nb::module_& m);
void init_convolution(nb::module_& m);
void init_quantized(nb::module_& m);
void init_transforms(nb::module_& m);
void init_memory(nb::module_& m);
void init_metal(nb::module_& m);  // after init_memory and init_fast
void init_io(nb::module_& m);
void init_export(nb::module_& m);

}  // namespace tessera::python
