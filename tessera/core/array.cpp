#include "tessera/core/array.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

#include "tessera/core/dispatch.h"
#include "tessera/core/gpu.h"
#include "tessera/core/eval.h"
#include "tessera/core/primitive.h"
#include "tessera/core/scheduler.h"
#include "tessera/memory/pool.h"

namespace tessera {

// Elements an array may have: their bytes, for any dtype, fit an int64.
constexpr size_t kMaxElements = size_t(1) << 60;

size_t shape_size(const Shape& shape) {
  size_t n = 1;
  bool overflow = false, zero = false;
  for (auto d : shape) {
    if (d < 0) {
      std::ostringstream msg;
      msg << "[array] negative dimension " << d << " in a shape";
      throw std::invalid_argument(msg.str());
    }
    if (d == 0) zero = true;
    if (d != 0 && n > kMaxElements / static_cast<size_t>(d)) overflow = true;
    n *= static_cast<size_t>(d);
  }
  if (zero) return 0;
  if (overflow) {
    std::ostringstream msg;
    msg << "[array] the number of elements of a shape (";
    for (size_t i = 0; i < shape.size(); ++i) msg << (i ? ", " : "") << shape[i];
    msg << ") overflows: at most 2^60 are possible";
    throw std::invalid_argument(msg.str());
  }
  return n;
}

namespace {
// Writes the row-major strides of shape into s, reusing its memory.
void fill_row_major_strides(const Shape& shape, Strides& s) {
  s.resize(shape.size());
  int64_t acc = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= shape[i];
  }
}
}  // namespace

Strides row_major_strides(const Shape& shape) {
  Strides s;
  fill_row_major_strides(shape, s);
  return s;
}

Flags compute_flags(const Shape& shape, const Strides& strides) {
  size_t size = shape_size(shape);
  bool row = true, col = true;
  int64_t acc = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    if (shape[i] == 1) continue;
    row &= strides[i] == acc;
    acc *= shape[i];
  }
  acc = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    col &= strides[i] == acc;
    acc *= shape[i];
  }
  bool contiguous = row || col;
  if (!contiguous && size > 0) {
    // A permutation of dense axes: sorted by stride, each stride is the product
    // of the extents below it.
    std::vector<std::pair<int64_t, int>> dims;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] != 1) dims.emplace_back(strides[i], shape[i]);
    }
    std::sort(dims.begin(), dims.end());
    contiguous = true;
    acc = 1;
    for (auto& [st, ext] : dims) {
      contiguous &= st == acc;
      acc *= ext;
    }
  }
  if (size == 0) row = col = contiguous = true;
  return Flags{contiguous, row, col};
}

namespace {
// The element offsets (lowest, highest) that a non-empty view reaches from its
// element at index 0.
std::pair<int64_t, int64_t> element_span(const Shape& shape, const Strides& strides) {
  int64_t lo = 0, hi = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t span = int64_t(shape[i] - 1) * strides[i];
    (span < 0 ? lo : hi) += span;
  }
  return {lo, hi};
}
}  // namespace

size_t compute_data_size(const Shape& shape, const Strides& strides) {
  if (shape_size(shape) == 0) return 0;
  auto [lo, hi] = element_span(shape, strides);
  return static_cast<size_t>(hi - lo + 1);
}

array::ArrayDesc::ArrayDesc(Shape shape_, Dtype dtype_)
    : shape(std::move(shape_)), size(shape_size(shape)), dtype(dtype_) {
  fill_row_major_strides(shape, strides);
}

// Note [Graph lifetime]: dropping the last handle to a long unevaluated chain
// must not recurse once per node, so the nodes are released with a stack.
array::ArrayDesc::~ArrayDesc() {
  if (!node) return;
  std::vector<std::shared_ptr<Node>> stack;
  if (node.use_count() == 1) stack.push_back(std::move(node));
  node = nullptr;
  while (!stack.empty()) {
    auto n = std::move(stack.back());
    stack.pop_back();
    for (auto& in : n->inputs) {
      auto& d = in.desc_;
      if (d.use_count() == 1 && d->node && d->node.use_count() == 1) {
        stack.push_back(std::move(d->node));
      }
    }
    n->inputs.clear();
  }
}

array::array(Empty, Shape shape, Dtype dtype)
    : desc_(std::allocate_shared<ArrayDesc>(pool::Allocator<ArrayDesc>(), std::move(shape),
                                            dtype)) {}

array::~array() = default;

void array::check_list_size(size_t n, const Shape& shape) {
  if (n != shape_size(shape)) {
    throw std::invalid_argument("[array] the initializer list has " + std::to_string(n) +
                                " elements but the shape needs " +
                                std::to_string(shape_size(shape)));
  }
}

void array::init_from(const void* src, Dtype src_dtype) {
  auto buffer = allocator::malloc(nbytes());
  cast_contiguous(src, src_dtype, buffer.raw_ptr(), dtype(), size());
  set_data(buffer);
}

array::array(const complex64_t& val, Dtype dtype) : array(Empty{}, Shape{}, dtype) {
  init_from(&val, complex64);
}

array::array(std::initializer_list<float> data)
    : array(data.begin(), Shape{static_cast<ShapeElem>(data.size())}, float32) {}

array::array(std::initializer_list<int> data, Dtype dtype)
    : array(data.begin(), Shape{static_cast<ShapeElem>(data.size())}, dtype) {}

array::array(void* data, Shape shape, Dtype dtype, const std::function<void(void*)>& deleter)
    : array(borrow(data, std::move(shape), {}, dtype, Device::cpu,
                   [deleter, data] { if (deleter) deleter(data); })) {}

array array::borrow(void* first, Shape shape, Strides strides, Dtype dtype, Device device,
                    std::function<void()> release) {
  array a(Empty{}, std::move(shape), dtype);
  if (strides.empty()) strides = row_major_strides(a.shape());
  if (strides.size() != a.ndim()) {
    throw std::invalid_argument("[array] " + std::to_string(strides.size()) +
                                " strides given for an array of " + std::to_string(a.ndim()) +
                                " dimensions");
  }
  size_t data_size = compute_data_size(a.shape(), strides);
  int64_t lo = a.size() ? element_span(a.shape(), strides).first : 0;
  size_t bytes = data_size * a.itemsize();
  void* base = static_cast<char*>(first) + lo * static_cast<int64_t>(a.itemsize());
  allocator::BufferStorage* storage =
      device.type == Device::gpu ? gpu::borrow_device(base, bytes, default_stream(Device::gpu))
                                 : new allocator::BufferStorage{base, bytes, bytes};
  storage->borrowed = true;
  Flags flags = compute_flags(a.shape(), strides);
  a.set_data(allocator::Buffer(storage), data_size, std::move(strides), flags,
             [release = std::move(release)](allocator::Buffer b) {
               auto* s = b.storage();
               // Waits for GPU work and copies that still read the memory.
               if (s->device || s->upload_event) gpu::release_device(s);
               if (s->host_block) allocator::free(allocator::Buffer(s->host_block));
               delete s;
               if (release) release();
             });
  a.desc_->offset = -lo;
  return a;
}

array::array(allocator::Buffer data, Shape shape, Dtype dtype, Deleter deleter)
    : array(Empty{}, std::move(shape), dtype) {
  set_data(data, std::move(deleter));
}

array::array(Shape shape, Dtype dtype, std::shared_ptr<Primitive> primitive,
             std::vector<array> inputs)
    : array(Empty{}, std::move(shape), dtype) {
  if (!primitive) return;  // a temporary for kernels: data comes from set_data
  // Note [Views of evaluated arrays]
  // A view (transpose, slice, broadcast...) of an evaluated array is made at
  // once: it moves no data, and as a node it would cost a task of the
  // stream's worker at every evaluation (a decoding step of a 1B model makes
  // 112 of them, each layer's w.T of nn.Linear). A tracer stays a node, for
  // the transform that reads its graph, and while a transform traces, every
  // view stays a node (compile and export replay it, shapeless ones at other
  // shapes); so does a view of an input whose task failed, whose error the
  // view's evaluation reports.
  if (primitive->is_view() && inputs.size() == 1 && !in_tracing()) {
    const array& in = inputs[0];
    if (in.is_available() && in.has_data() && !in.desc_->tracer && !in.error()) {
      primitive->as_unary()->eval_cpu(inputs, *this);
      return;
    }
  }
  auto node = std::allocate_shared<Node>(pool::Allocator<Node>());
  node->primitive = std::move(primitive);
  node->inputs = std::move(inputs);
  for (auto& in : node->inputs) desc_->tracer = desc_->tracer || in.desc_->tracer;
  desc_->node = std::move(node);
  desc_->status.store(ArrayStatus::unscheduled, std::memory_order_relaxed);
}

std::vector<array> array::make_arrays(std::vector<Shape> shapes,
                                      const std::vector<Dtype>& dtypes,
                                      const std::shared_ptr<Primitive>& primitive,
                                      const std::vector<array>& inputs) {
  auto node = std::allocate_shared<Node>(pool::Allocator<Node>());
  node->primitive = primitive;
  node->inputs = inputs;
  node->output_shapes = shapes;
  node->output_dtypes = dtypes;
  bool tracer = false;
  for (auto& in : inputs) tracer = tracer || in.desc_->tracer;
  std::vector<array> outs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    array a(Empty{}, std::move(shapes[i]), dtypes[i]);
    a.desc_->node = node;
    a.desc_->tracer = tracer;
    a.desc_->position = static_cast<int>(i);
    a.desc_->status.store(ArrayStatus::unscheduled, std::memory_order_relaxed);
    node->outputs.push_back(a.desc_);
    outs.push_back(std::move(a));
  }
  return outs;
}

namespace {
int normalize_dim(int dim, size_t ndim, const char* what) {
  int nd = static_cast<int>(ndim);
  if (dim < -nd || dim >= nd) {
    std::ostringstream msg;
    msg << "[array::" << what << "] dimension " << dim << " is out of range for an array with "
        << ndim << " dimensions";
    throw std::out_of_range(msg.str());
  }
  return dim < 0 ? dim + nd : dim;
}
}  // namespace

ShapeElem array::shape(int dim) const { return desc_->shape[normalize_dim(dim, ndim(), "shape")]; }

int64_t array::strides(int dim) const {
  return desc_->strides[normalize_dim(dim, ndim(), "strides")];
}

void array::eval() { tessera::eval({*this}); }

void array::wait() {
  if (status() == ArrayStatus::unscheduled) {
    eval();
    return;
  }
  scheduler::wait_available(*this);
  if (desc_->error) std::rethrow_exception(desc_->error);
}

void* array::raw_data() const {
  if (!desc_->data) {
    throw std::runtime_error("[array::data] the array has no data: evaluate it first");
  }
  auto* storage = desc_->data->buffer.storage();
  if (storage && !storage->host_valid) gpu::make_host_valid(storage);
  return static_cast<char*>(desc_->data->buffer.raw_ptr()) + desc_->offset * itemsize();
}

void* array::mutable_data() {
  void* p = raw_data();
  auto* storage = desc_->data->buffer.storage();
  if (storage && (storage->device || storage->upload_event)) gpu::host_write(storage);
  return p;
}

Primitive& array::primitive() const {
  if (!desc_->node) throw std::logic_error("[array::primitive] the array has no primitive");
  return *desc_->node->primitive;
}

std::shared_ptr<Primitive> array::primitive_ptr() const {
  return desc_->node ? desc_->node->primitive : nullptr;
}

const std::vector<array>& array::inputs() const {
  static const std::vector<array> none;
  return desc_->node ? desc_->node->inputs : none;
}

std::vector<array> array::siblings() const {
  std::vector<array> out;
  if (!desc_->node) return out;  // a single output has none (Node::outputs is empty)
  for (auto& w : desc_->node->outputs) {
    auto d = w.lock();
    if (d && d != desc_) out.push_back(array(d));
  }
  return out;
}

std::vector<array> array::outputs() const {
  if (!desc_->node || desc_->node->outputs.empty()) return {*this};
  const auto& node = desc_->node;
  std::vector<array> out;
  for (size_t i = 0; i < node->outputs.size(); ++i) {
    auto d = node->outputs[i].lock();
    if (!d) {
      array a(Empty{}, node->output_shapes[i], node->output_dtypes[i]);
      a.desc_->node = node;
      a.desc_->tracer = desc_->tracer;
      a.desc_->position = static_cast<int>(i);
      a.desc_->status.store(ArrayStatus::unscheduled, std::memory_order_relaxed);
      node->outputs[i] = a.desc_;
      d = a.desc_;
    }
    out.push_back(array(std::move(d)));
  }
  return out;
}

void array::detach() { desc_->node = nullptr; }

bool array::release_data_if_last() {
  if (desc_.use_count() != 1 || desc_->node) return false;
  desc_->data = nullptr;
  return true;
}

namespace {
std::atomic<int> g_tracing{0};
}  // namespace

bool array::in_tracing() { return g_tracing.load(std::memory_order_relaxed) > 0; }
array::TracingScope::TracingScope() { g_tracing.fetch_add(1, std::memory_order_relaxed); }
array::TracingScope::~TracingScope() { g_tracing.fetch_sub(1, std::memory_order_relaxed); }

array::ArrayIterator array::begin() const {
  if (ndim() == 0) throw std::invalid_argument("[array::begin] cannot iterate over a 0-d array");
  return ArrayIterator(*this, 0);
}
array::ArrayIterator array::end() const {
  if (ndim() == 0) throw std::invalid_argument("[array::end] cannot iterate over a 0-d array");
  return ArrayIterator(*this, shape(0));
}

void array::set_data(allocator::Buffer buffer, Deleter deleter) {
  desc_->data = std::allocate_shared<Data>(pool::Allocator<Data>(), buffer, std::move(deleter));
  desc_->offset = 0;
  desc_->data_size = size();
  fill_row_major_strides(shape(), desc_->strides);
  bool col = ndim() <= 1 || size() <= 1;
  if (!col) {
    // A shape with at most one extent > 1 is also column-contiguous.
    int big = 0;
    for (auto d : shape()) big += d > 1;
    col = big <= 1;
  }
  desc_->flags = Flags{true, true, col};
}

void array::set_data(allocator::Buffer buffer, size_t data_size, Strides strides, Flags flags,
                     Deleter deleter) {
  desc_->data = std::allocate_shared<Data>(pool::Allocator<Data>(), buffer, std::move(deleter));
  desc_->offset = 0;
  desc_->data_size = data_size;
  desc_->strides = std::move(strides);
  desc_->flags = flags;
}

void array::copy_shared_buffer(const array& other, const Strides& strides, Flags flags,
                               size_t data_size, int64_t offset) {
  desc_->data = other.desc_->data;
  desc_->strides = strides;
  desc_->flags = flags;
  desc_->data_size = data_size;
  desc_->offset = other.desc_->offset + offset;
}

void array::copy_shared_buffer(const array& other) {
  copy_shared_buffer(other, other.strides(), other.flags(), other.data_size());
}

void array::move_shared_buffer(array other, const Strides& strides, Flags flags,
                               size_t data_size, int64_t offset) {
  desc_->data = std::move(other.desc_->data);
  desc_->strides = strides;
  desc_->flags = flags;
  desc_->data_size = data_size;
  desc_->offset = other.desc_->offset + offset;
}

void array::move_shared_buffer(array other) {
  auto strides = other.strides();
  move_shared_buffer(other, strides, other.flags(), other.data_size());
}

bool array::is_donatable() const {
  return desc_.use_count() == 1 && desc_->data && desc_->data.use_count() == 1 &&
         !(desc_->data->buffer.storage() && desc_->data->buffer.storage()->borrowed);
}

namespace {
// Note [Scalar operands] in core/array.h. An entry is keyed by the source
// element's bits and dtype and the constant's dtype, so that a hit casts
// nothing (two sources that cast to one value may hold two equal constants).
struct ScalarCache {
  static constexpr int kSize = 64;
  struct Entry {
    uint64_t bits = 0;
    Dtype src = bool_;
    Dtype dtype = bool_;
    std::optional<array> value;
  };
  Entry entries[kSize];
  int last = 0;  // the entry found or made last: chains repeat one scalar
  int next = 0;  // the entry replaced next
};

ScalarCache& scalar_cache() {
  thread_local ScalarCache cache;
  return cache;
}
}  // namespace

array array::cached_scalar(const void* src, Dtype src_dtype, Dtype dtype) {
  static_assert(sizeof(uint64_t) >= sizeof(complex64_t), "every element fits the key");
  uint64_t bits = 0;
  std::memcpy(&bits, src, src_dtype.size);
  auto& cache = scalar_cache();
  auto hit = [&](const ScalarCache::Entry& e) {
    return e.bits == bits && e.src == src_dtype && e.dtype == dtype && e.value;
  };
  if (hit(cache.entries[cache.last])) return *cache.entries[cache.last].value;
  for (int i = 0; i < ScalarCache::kSize; ++i) {
    if (hit(cache.entries[i])) {
      cache.last = i;
      return *cache.entries[i].value;
    }
  }
  array a(Empty{}, Shape{}, dtype);
  a.init_from(src, src_dtype);
  int i = cache.next;
  cache.next = (i + 1) % ScalarCache::kSize;
  cache.entries[i] = {bits, src_dtype, dtype, a};
  cache.last = i;
  return a;
}

template <typename T>
T array::item_impl() const {
  if (size() != 1) {
    std::ostringstream msg;
    msg << "[item] the array must have exactly one element, it has " << size();
    throw std::invalid_argument(msg.str());
  }
  const void* p = raw_data();
  return tessera::dispatch_all(dtype(), [&](auto tag) -> T {
    using S = typename decltype(tag)::type;
    return tessera::cast_to<T>(*static_cast<const S*>(p));
  });
}

template bool array::item_impl<bool>() const;
template uint8_t array::item_impl<uint8_t>() const;
template uint16_t array::item_impl<uint16_t>() const;
template uint32_t array::item_impl<uint32_t>() const;
template uint64_t array::item_impl<uint64_t>() const;
template int8_t array::item_impl<int8_t>() const;
template int16_t array::item_impl<int16_t>() const;
template int32_t array::item_impl<int32_t>() const;
template int64_t array::item_impl<int64_t>() const;
template float16_t array::item_impl<float16_t>() const;
template bfloat16_t array::item_impl<bfloat16_t>() const;
template float array::item_impl<float>() const;
template double array::item_impl<double>() const;
template complex64_t array::item_impl<complex64_t>() const;

}  // namespace tessera
