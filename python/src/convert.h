// Shared by the binding files of tessera.core: Python values to arrays (with the
// reference's weak-scalar rules), arrays to Python values, and the argument
// types that many bindings take.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <optional>
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

// Any ArrayLike (array, scalar, nested list/tuple, NumPy/DLPack/buffer object,
// object with __tessera_array__ or __mlx_array__) to an array, cast to dtype if given.
array to_array(nb::handle v, std::optional<Dtype> dtype = std::nullopt);
// A Python scalar to an array, taking the other operand's dtype as the hint
// (reference §3.3): the weak-scalar rule.
array scalar_to_array(nb::handle v, Dtype hint);
bool is_python_scalar(nb::handle v);
// Two operands of a binary op: an array and a scalar follow the weak-scalar rule,
// two scalars convert independently.
std::pair<array, array> to_arrays(nb::handle a, nb::handle b);
// The other operand of a binary op whose one operand is the array a.
array operand_with(const array& a, nb::handle b);
// True for objects to_array accepts.
bool is_array_like(nb::handle v);

// Evaluated values back to Python.
nb::object item(const array& a);
nb::object tolist(const array& a);
// A NumPy array sharing the array's memory (bfloat16 becomes float32, a copy).
nb::object to_numpy(const array& a, std::optional<nb::handle> dtype = std::nullopt);
// A DLPack capsule over the array's memory (no copy; the capsule keeps it alive).
nb::object to_dlpack(const array& a);
// A row-contiguous host copy of an ndarray-like object (NumPy, DLPack, buffer).
std::optional<array> from_buffer(nb::handle v);

std::vector<int> to_vec(const IntOrVec& v);

// Shape arguments: an int or a sequence of ints.
Shape to_shape(nb::handle v, const char* op);

using ArrayClass = nb::class_<array>;

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
void init_linalg(nb::module_& m, ArrayClass& cls);
void init_scan(nb::module_& m, ArrayClass& cls);
void init_sort(nb::module_& m, ArrayClass& cls);
void init_decompositions(nb::module_& m);
void init_random(nb::module_& m);
void init_fft(nb::module_& m);
void init_quantized(nb::module_& m);
void init_gather(nb::module_& m, ArrayClass& cls);
void init_transforms(nb::module_& m);
void init_memory(nb::module_& m);

}  // namespace tessera::python
