// The array: a cheap handle to a node of the lazy graph.
//
//   array a({1.f, 2.f, 3.f, 4.f}, {2, 2});   // float32, evaluated
//   array b = add(a, a);                       // lazy: nothing runs yet
//   eval(b);                                   // runs the graph
//   float x = b.item<float>();                 // only for one element
//
// Note [Strides and flags]
// strides() are in elements. An array's data is data_size() elements of its
// Buffer starting at offset(). Flags:
//   row_contiguous  strides are those of a C-ordered array of shape()
//   col_contiguous  strides are those of a Fortran-ordered array of shape()
//   contiguous      the elements fill data_size() == size() consecutive slots in
//                   some order (a permutation of axes, no gaps, no broadcast)
// Broadcast dimensions have stride 0; then data_size() < size().
//
// Note [Graph lifetime]
// An unevaluated array holds a Node: its primitive, inputs and the outputs it
// shares with siblings (multi-output primitives). eval() schedules each node on
// its stream and detaches it (drops primitive and inputs), so memory behind
// intermediate results is released as soon as the tasks that read it have run.
#pragma once

#include <atomic>
#include <complex>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <vector>

#include "tessera/core/device.h"
#include "tessera/core/dtype.h"
#include "tessera/memory/allocator.h"

namespace tessera {

using ShapeElem = int32_t;
using Shape = std::vector<ShapeElem>;
using Strides = std::vector<int64_t>;

class Primitive;
class array;

namespace detail {
// The dtype that represents a C++ element type exactly (double stays float64 here,
// unlike dtype_of, which follows the C++ scalar rule double -> float32).
template <typename T>
inline constexpr Dtype exact_dtype = dtype_of<T>;
template <>
inline constexpr Dtype exact_dtype<double> = float64;
}  // namespace detail

struct Flags {
  bool contiguous : 1;
  bool row_contiguous : 1;
  bool col_contiguous : 1;
};

enum class ArrayStatus : uint8_t {
  unscheduled,  // has a node, not yet handed to a stream
  scheduled,    // handed to a stream; data arrives when its task has run
  available,    // data is ready (or the task failed: see error())
};

class array {
 public:
  using Deleter = std::function<void(allocator::Buffer)>;

  // Scalars (0-d).
  template <typename T>
  explicit array(T val, Dtype dtype = dtype_of<T>);
  explicit array(const complex64_t& val, Dtype dtype = complex64);

  // Copy size(shape) elements from an iterator.
  template <typename It>
  array(It data, Shape shape,
        Dtype dtype = dtype_of<typename std::iterator_traits<It>::value_type>);

  template <typename T>
  array(std::initializer_list<T> data, Dtype dtype = dtype_of<T>);
  array(std::initializer_list<float> data);
  array(std::initializer_list<int> data, Dtype dtype);
  template <typename T>
  array(std::initializer_list<T> data, Shape shape, Dtype dtype = dtype_of<T>);

  // Wrap external memory without copying; `deleter` runs when no array uses it.
  // The memory is never written in place (Note [Borrowed memory]).
  array(void* data, Shape shape, Dtype dtype, const std::function<void(void*)>& deleter);
  // Wrap memory that another library owns without copying (Note [Borrowed
  // memory]): `first` is the address of the element at index 0, in host memory
  // or, for Device::gpu, in GPU memory written by work that the default GPU
  // stream is ordered after. Strides are in elements, of any sign (empty:
  // row-major). `release` runs once no array uses the memory and no GPU work
  // reads it.
  static array borrow(void* first, Shape shape, Strides strides, Dtype dtype, Device device,
                      std::function<void()> release);
  // Adopt an allocator buffer holding row-contiguous data.
  array(allocator::Buffer data, Shape shape, Dtype dtype, Deleter deleter = allocator::free);

  // A lazy output of `primitive` applied to `inputs`. With a null primitive: an
  // array without data, for kernels to fill in with set_data (a temporary).
  array(Shape shape, Dtype dtype, std::shared_ptr<Primitive> primitive,
        std::vector<array> inputs);
  // All outputs of a multi-output primitive.
  static std::vector<array> make_arrays(std::vector<Shape> shapes,
                                        const std::vector<Dtype>& dtypes,
                                        const std::shared_ptr<Primitive>& primitive,
                                        const std::vector<array>& inputs);

  array(const array&) = default;
  array(array&&) = default;
  array& operator=(const array&) = default;
  array& operator=(array&&) = default;
  ~array();

  // Shape and type.
  size_t size() const { return desc_->size; }
  size_t ndim() const { return desc_->shape.size(); }
  size_t itemsize() const { return desc_->dtype.size; }
  size_t nbytes() const { return size() * itemsize(); }
  Dtype dtype() const { return desc_->dtype; }
  const Shape& shape() const { return desc_->shape; }
  ShapeElem shape(int dim) const;
  const Strides& strides() const { return desc_->strides; }
  int64_t strides(int dim) const;

  // Evaluation.
  void eval();
  template <typename T>
  T item();
  template <typename T>
  T item() const;
  // Block until the data of a scheduled array is ready (rethrows its task's error).
  void wait();
  ArrayStatus status() const { return desc_->status.load(std::memory_order_acquire); }
  bool is_available() const { return status() == ArrayStatus::available; }

  // Data access (after evaluation). data<T>() points at the first element.
  // The non-const form is for writing: the host copy becomes the only valid
  // one (a device copy is refreshed at its next GPU use).
  template <typename T>
  T* data() {
    return static_cast<T*>(mutable_data());
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(raw_data());
  }
  void* raw_data() const;
  void* mutable_data();
  Flags flags() const { return desc_->flags; }
  size_t data_size() const { return desc_->data_size; }
  int64_t offset() const { return desc_->offset; }
  allocator::Buffer& buffer() { return desc_->data->buffer; }
  const allocator::Buffer& buffer() const { return desc_->data->buffer; }
  bool has_data() const { return desc_->data != nullptr; }

  // Identity.
  std::uintptr_t id() const { return reinterpret_cast<std::uintptr_t>(desc_.get()); }
  bool is_same(const array& o) const { return desc_ == o.desc_; }

  // Graph (valid while unevaluated).
  bool has_primitive() const { return desc_->node != nullptr; }
  Primitive& primitive() const;
  std::shared_ptr<Primitive> primitive_ptr() const;
  const std::vector<array>& inputs() const;
  // Outputs of the same primitive other than this one (those still alive).
  std::vector<array> siblings() const;
  // Every output of this array's primitive, in position order: this array,
  // its live siblings, and dropped siblings made again (unevaluated, attached
  // to the same node) so that transform rules see them all.
  std::vector<array> outputs() const;
  // This array's position among the outputs of its primitive.
  int position() const { return desc_->position; }
  // Drop primitive and inputs (after scheduling).
  void detach();
  // The last handle of an array without a graph drops its data, whose buffer
  // returns at once, and keeps the rest (Note [Retired arrays] in
  // core/eval.cpp); true if it was the last handle.
  bool release_data_if_last();
  // See Note [Tracers] in transforms/transforms.h: computed from the inputs of
  // a function being transformed, so its graph outlives evaluation.
  bool is_tracer() const { return desc_->tracer && in_tracing(); }
  // True while a transform runs the function it transforms (TracingScope).
  static bool in_tracing();
  struct TracingScope {
    TracingScope();
    ~TracingScope();
    TracingScope(const TracingScope&) = delete;
    TracingScope& operator=(const TracingScope&) = delete;
  };
  void set_tracer(bool tracer) { desc_->tracer = tracer; }

  // Sub-arrays along axis 0 (for range-for over an array).
  class ArrayIterator;
  ArrayIterator begin() const;
  ArrayIterator end() const;

  // Used by kernels to fill in outputs.
  void set_data(allocator::Buffer buffer, Deleter deleter = allocator::free);
  void set_data(allocator::Buffer buffer, size_t data_size, Strides strides, Flags flags,
                Deleter deleter = allocator::free);
  // A view of other's buffer.
  void copy_shared_buffer(const array& other, const Strides& strides, Flags flags,
                          size_t data_size, int64_t offset = 0);
  void copy_shared_buffer(const array& other);
  // Take over other's buffer (donation): other must not be read afterwards.
  void move_shared_buffer(array other, const Strides& strides, Flags flags,
                          size_t data_size, int64_t offset = 0);
  void move_shared_buffer(array other);
  // The buffer is referenced by this array alone and may be written in place
  // (never true of borrowed memory, nor of a cached scalar operand).
  bool is_donatable() const;

  // The 0-d constant holding the element at src (of src_dtype) cast to
  // dtype, from this thread's cache of scalar operands (scalar_operand).
  static array cached_scalar(const void* src, Dtype src_dtype, Dtype dtype);

  // Scheduling state (used by eval).
  void set_status(ArrayStatus s) { desc_->status.store(s, std::memory_order_release); }
  // Blocks while the status is still s (std::atomic::wait); a status change
  // wakes the waiters through notify_status.
  void wait_status_change(ArrayStatus s) const { desc_->status.wait(s, std::memory_order_acquire); }
  void notify_status() { desc_->status.notify_all(); }
  void set_error(std::exception_ptr e) { desc_->error = std::move(e); }
  const std::exception_ptr& error() const { return desc_->error; }

  // Used by the graph traversal in eval.
  struct Node;
  Node* node() const { return desc_->node.get(); }

 private:
  struct Data {
    allocator::Buffer buffer;
    Deleter deleter;
    Data(allocator::Buffer b, Deleter d) : buffer(b), deleter(std::move(d)) {}
    ~Data() {
      if (deleter) deleter(buffer);
    }
  };

  struct ArrayDesc {
    Shape shape;
    Strides strides;
    size_t size;
    Dtype dtype;

    std::shared_ptr<Node> node;
    int position = 0;
    bool tracer = false;

    std::shared_ptr<Data> data;
    int64_t offset = 0;
    size_t data_size = 0;
    Flags flags{true, true, true};

    std::atomic<ArrayStatus> status{ArrayStatus::available};
    std::exception_ptr error;

    ArrayDesc(Shape shape, Dtype dtype);
    ~ArrayDesc();
  };

  explicit array(std::shared_ptr<ArrayDesc> desc) : desc_(std::move(desc)) {}
  struct Empty {};
  // An array with no node and no data yet (constructors fill it in).
  array(Empty, Shape shape, Dtype dtype);
  // Copies size() elements of type src_dtype from src, casting to dtype().
  void init_from(const void* src, Dtype src_dtype);
  static void check_list_size(size_t n, const Shape& shape);
  // Reads the single element, converted to T.
  template <typename T>
  T item_impl() const;

  std::shared_ptr<ArrayDesc> desc_;
  friend struct Node;
  friend void release_graph(std::shared_ptr<ArrayDesc>&);
};

struct array::Node {
  std::shared_ptr<Primitive> primitive;
  std::vector<array> inputs;
  // The outputs of a multi-output primitive, held weakly so that siblings do
  // not keep each other alive; empty for a single output, which is the one
  // array that holds the node (one allocation less per node).
  std::vector<std::weak_ptr<ArrayDesc>> outputs;
  // Shapes and dtypes of the outputs, to recreate dropped siblings at eval.
  std::vector<Shape> output_shapes;
  std::vector<Dtype> output_dtypes;
  uint32_t visit_mark = 0;
  size_t num_outputs() const { return outputs.empty() ? 1 : outputs.size(); }
};

class array::ArrayIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using difference_type = std::ptrdiff_t;
  using value_type = array;
  using reference = array;
  ArrayIterator(const array& arr, int idx) : arr_(arr), idx_(idx) {}
  array operator*() const;
  ArrayIterator& operator++() {
    ++idx_;
    return *this;
  }
  bool operator==(const ArrayIterator& o) const { return idx_ == o.idx_; }
  bool operator!=(const ArrayIterator& o) const { return idx_ != o.idx_; }

 private:
  array arr_;
  int idx_;
};

// Note [Scalar operands]
// A C++ or Python scalar that becomes an operand of an op (`x + 1.0f`, Python's
// `x * 0.5`) is taken from a small per-thread cache of 0-d constants, 64 of
// them, keyed by the scalar's bits and type and the constant's dtype, replaced
// round-robin: a loop that applies the same scalar again and again creates,
// frees and (on the GPU) uploads no array per op.
// Many ops share one constant, so it is never written in place:
// - the cache keeps a handle to it, so array::is_donatable is false for the
//   constant and for every view of it (they share its data) as long as it is
//   cached; once replaced, whoever still holds it holds it alone;
// - only operands of ops come from the cache, never an array that is returned
//   to the caller (who may write it through data<T>() or a writable buffer).
// Each constant is evaluated and valid on the host, so the GPU's binary
// kernels take its one element by value (Note [Scalar operands on the GPU]
// of the CUDA backend's binary kernels).
template <typename T>
array scalar_operand(T val, Dtype dtype = dtype_of<T>);

// Number of elements of a shape (throws if it overflows).
size_t shape_size(const Shape& shape);
// Row-major strides of a shape.
Strides row_major_strides(const Shape& shape);
// The flags of a view with these strides (see Note [Strides and flags]).
Flags compute_flags(const Shape& shape, const Strides& strides);
// Elements of the buffer a view spans: size when contiguous, else the distance
// from its first to its last element plus one (strides may be negative).
size_t compute_data_size(const Shape& shape, const Strides& strides);

// ---- template definitions -------------------------------------------------

template <typename T>
array::array(T val, Dtype dtype) : array(Empty{}, Shape{}, dtype) {
  if constexpr (std::is_same_v<T, bool>) {
    uint8_t b = val;
    init_from(&b, bool_);
  } else {
    init_from(&val, detail::exact_dtype<T>);
  }
}

template <typename T>
array scalar_operand(T val, Dtype dtype) {
  if constexpr (std::is_same_v<T, bool>) {
    uint8_t b = val;
    return array::cached_scalar(&b, bool_, dtype);
  } else {
    return array::cached_scalar(&val, detail::exact_dtype<T>, dtype);
  }
}

template <typename It>
array::array(It data, Shape shape, Dtype dtype) : array(Empty{}, std::move(shape), dtype) {
  using T = typename std::iterator_traits<It>::value_type;
  std::vector<T> tmp(size());
  for (size_t i = 0; i < tmp.size(); ++i, ++data) tmp[i] = *data;
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> b(tmp.begin(), tmp.end());
    init_from(b.data(), bool_);
  } else {
    init_from(tmp.data(), detail::exact_dtype<T>);
  }
}

template <typename T>
array::array(std::initializer_list<T> data, Dtype dtype)
    : array(data.begin(), Shape{static_cast<ShapeElem>(data.size())}, dtype) {}

template <typename T>
array::array(std::initializer_list<T> data, Shape shape, Dtype dtype)
    : array((check_list_size(data.size(), shape), data.begin()), shape, dtype) {}

template <typename T>
T array::item() {
  eval();
  return item_impl<T>();
}
template <typename T>
T array::item() const {
  array(*this).eval();
  return item_impl<T>();
}

}  // namespace tessera
