// DLPack both ways: __dlpack__ / __dlpack_device__ of arrays (host or GPU
// memory, versioned or not) and from_dlpack / asarray of any producer, without
// a copy (see Note [Borrowed memory] in memory/allocator.h).
#include <nanobind/ndarray.h>

#include <mutex>
#include <sstream>

#include "convert.h"
#include "tessera/core/gpu.h"

namespace tessera::python {

namespace {

// The DLPack ABI (dlpack.h 1.x) around nanobind's DLTensor.
using DLTensor = nb::dlpack::dltensor;
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
struct DLPackVersion {
  uint32_t major, minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned*);
  uint64_t flags;
  DLTensor dl_tensor;
};
constexpr uint64_t kReadOnly = 1;
constexpr int kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3;
// DLPack's stream values for CUDA: the legacy default stream; no synchronisation.
constexpr std::intptr_t kLegacyStream = 1, kNoSync = -1;

// Note [DLPack deleters]
// A producer's deleter may take the GIL (NumPy's does), but the last array
// using imported memory can die on a stream worker while the thread holding
// the GIL waits for that worker. Deleters therefore run on a thread holding
// the GIL: at once when the releasing thread holds it, otherwise queued and
// run by a pending call of the interpreter (or at the next import).
std::mutex g_pending_mutex;
std::vector<std::function<void()>> g_pending;

void run_pending() {
  std::vector<std::function<void()>> work;
  {
    std::lock_guard l(g_pending_mutex);
    work.swap(g_pending);
  }
  for (auto& f : work) f();
}

}  // namespace

void release_with_gil(std::function<void()> f) {
  if (!Py_IsInitialized()) return;  // the interpreter is gone: nothing may run
  if (PyGILState_Check()) {
    f();
    return;
  }
  {
    std::lock_guard l(g_pending_mutex);
    g_pending.push_back(std::move(f));
  }
  Py_AddPendingCall([](void*) { run_pending(); return 0; }, nullptr);
}

namespace {

// An imported managed tensor, owned once its capsule is renamed "used_...".
struct Imported {
  void* mt;
  bool versioned;
  Imported(void* mt, bool versioned) : mt(mt), versioned(versioned) {}
  Imported(const Imported&) = delete;
  Imported& operator=(const Imported&) = delete;
  DLTensor& tensor() const {
    return versioned ? static_cast<DLManagedTensorVersioned*>(mt)->dl_tensor
                     : static_cast<DLManagedTensor*>(mt)->dl_tensor;
  }
  ~Imported() {
    if (versioned) {
      auto* m = static_cast<DLManagedTensorVersioned*>(mt);
      if (m->deleter) m->deleter(m);
    } else {
      auto* m = static_cast<DLManagedTensor*>(mt);
      if (m->deleter) m->deleter(m);
    }
  }
};

std::string device_text(int type, int id) {
  return "(" + std::to_string(type) + ", " + std::to_string(id) + ")";
}

// Kernels read elements of type t at addresses aligned to this.
bool is_aligned(const void* p, Dtype t) {
  return reinterpret_cast<std::uintptr_t>(p) % (t == complex64 ? 4 : t.size) == 0;
}

// Calls x.__dlpack__ as a consumer of device type `dev_type`: with a stream
// for CUDA, asking for a versioned capsule first (producers that predate
// max_version raise TypeError).
nb::object call_dlpack(nb::handle x, int dev_type) {
  nb::dict kw;
  if (dev_type == kDLCUDA) kw["stream"] = gpu::stream_handle(default_stream(Device::gpu));
  kw["max_version"] = nb::make_tuple(1, 0);
  try {
    return x.attr("__dlpack__")(**kw);
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_TypeError)) throw;
  }
  PyDict_DelItemString(kw.ptr(), "max_version");
  return x.attr("__dlpack__")(**kw);
}

}  // namespace

std::optional<array> import_dlpack(nb::handle x, std::optional<bool> copy, const char* op) {
  if (!nb::hasattr(x, "__dlpack__")) return std::nullopt;
  run_pending();
  int dev_type = kDLCPU, dev_id = 0;
  if (nb::hasattr(x, "__dlpack_device__")) {
    nb::tuple d = nb::cast<nb::tuple>(x.attr("__dlpack_device__")());
    dev_type = nb::cast<int>(d[0]);
    dev_id = nb::cast<int>(d[1]);
  }
  const bool on_gpu = dev_type == kDLCUDA;
  if (on_gpu && !is_available(Device::gpu)) {
    throw std::invalid_argument(std::string("[") + op + "] the tensor is in CUDA memory " +
                                device_text(dev_type, dev_id) +
                                " but no GPU is available; copy it to the host first");
  }
  if (on_gpu && dev_id != 0) {
    throw std::invalid_argument(std::string("[") + op + "] the tensor is on CUDA device " +
                                std::to_string(dev_id) + "; only device 0 can be imported");
  }
  if (!on_gpu && dev_type != kDLCPU && dev_type != kDLCUDAHost) {
    throw std::invalid_argument(std::string("[") + op + "] cannot import memory of DLPack device " +
                                device_text(dev_type, dev_id) + " (only CPU and CUDA)");
  }
  nb::object cap;
  try {
    cap = call_dlpack(x, dev_type);
  } catch (nb::python_error& e) {
    // E.g. older NumPy refuses read-only arrays: the buffer protocol copies them.
    if (!e.matches(PyExc_BufferError) || on_gpu || copy == false) throw;
    return std::nullopt;
  }
  const bool versioned = PyCapsule_IsValid(cap.ptr(), "dltensor_versioned");
  if (!versioned && !PyCapsule_IsValid(cap.ptr(), "dltensor")) {
    throw std::invalid_argument(std::string("[") + op + "] __dlpack__ returned no DLPack capsule");
  }
  void* mt = PyCapsule_GetPointer(cap.ptr(), versioned ? "dltensor_versioned" : "dltensor");
  if (versioned && static_cast<DLManagedTensorVersioned*>(mt)->version.major != 1) {
    // Left unconsumed: the capsule frees it.
    auto major = static_cast<DLManagedTensorVersioned*>(mt)->version.major;
    throw std::invalid_argument(std::string("[") + op + "] unsupported DLPack version " +
                                std::to_string(major));
  }
  PyCapsule_SetName(cap.ptr(), versioned ? "used_dltensor_versioned" : "used_dltensor");
  std::unique_ptr<Imported> owner(new Imported{mt, versioned});
  const DLTensor& t = owner->tensor();

  auto dtype = t.dtype.lanes == 1 ? dlpack_dtype(t.dtype) : std::nullopt;
  if (!dtype) {
    std::ostringstream msg;
    msg << "[" << op << "] unsupported element type (DLPack code " << int(t.dtype.code) << ", "
        << int(t.dtype.bits) << " bits, " << t.dtype.lanes << " lanes)";
    throw std::invalid_argument(msg.str());
  }
  Shape shape;
  Strides strides;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] > INT32_MAX) {
      throw std::invalid_argument(std::string("[") + op + "] dimension " +
                                  std::to_string(t.shape[i]) + " exceeds int32");
    }
    shape.push_back(static_cast<ShapeElem>(t.shape[i]));
    if (t.strides) strides.push_back(t.strides[i]);
  }
  char* first = static_cast<char*>(t.data) + t.byte_offset;
  const Device device = on_gpu ? Device::gpu : Device::cpu;
  if (!is_aligned(first, *dtype) && shape_size(shape) > 0 && (copy == false || on_gpu)) {
    throw std::invalid_argument(std::string("[") + op + "] the memory is not aligned to its " +
                                dtype_name(*dtype) + " elements" +
                                (on_gpu ? "" : ": copy=False cannot import it"));
  }
  Imported* raw = owner.release();
  auto release = [raw] { release_with_gil([raw] { delete raw; }); };
  if (copy == true || !is_aligned(first, *dtype) || shape_size(shape) == 0) {
    return copy_of(first, shape, strides, *dtype, device, release);
  }
  return array::borrow(first, shape, strides, *dtype, device, release);
}

namespace {
// Imported bools may hold bytes other than 0 and 1 (as NumPy's may): those
// read as True.
array normalize_bools(const array& a) {
  return a.dtype() == bool_ ? astype(view(a, uint8), bool_) : a;
}
}  // namespace

array copy_of(void* first, const Shape& shape, Strides strides, Dtype dtype, Device device,
              std::function<void()> release) {
  // A large host array is copied where it will be used: with the GPU the
  // default device, the copy is made there, its source uploaded straight
  // from the host memory (Note [Uploads through pinned memory] in
  // backend/cuda/residency.cpp) rather than copied into host memory first
  // and uploaded at its first use.
  constexpr int64_t kCopyOnGpuBytes = int64_t{16} << 20;
  const bool copy_on_gpu = device == Device::gpu ||
                           (default_device() == Device::gpu &&
                            shape_size(shape) * static_cast<int64_t>(dtype.size) >= kCopyOnGpuBytes);
  if (shape_size(shape) > 0 && is_aligned(first, dtype)) {
    array a = tessera::copy(array::borrow(first, shape, strides, dtype, device, std::move(release)),
                            copy_on_gpu ? Device::gpu : Device::cpu);
    {
      nb::gil_scoped_release nogil;
      a.eval();
    }
    run_pending();  // the borrowed memory, released by the copy
    return normalize_bools(a);
  }
  // Empty, or elements at unaligned addresses (host memory only): byte-wise.
  auto buf = allocator::malloc(shape_size(shape) * dtype.size);
  if (shape_size(shape) > 0) {
    if (strides.empty()) strides = row_major_strides(shape);
    std::vector<int64_t> shape64(shape.begin(), shape.end());
    strided_copy(static_cast<const char*>(first), static_cast<char*>(buf.raw_ptr()),
                 shape64.data(), strides.data(), static_cast<int>(shape.size()), dtype.size);
  }
  release();
  return normalize_bools(array(buf, shape, dtype));
}

namespace {

// Where the data lives: the GPU when only the device copy is valid (also
// while the GPU is the default device, so that arrays made from host data
// still cross to NumPy as host memory).
bool exports_on_gpu(array& x) {
  if (!is_available(Device::gpu)) return false;
  {
    nb::gil_scoped_release nogil;
    x.eval();
  }
  auto* s = x.buffer().storage();
  return s && !s->host_valid;
}

// The owner of an exported managed tensor (MT: versioned or not).
template <typename MT>
struct Exported {
  MT mt{};
  array keep;
  std::vector<int64_t> shape, strides;
  allocator::BufferStorage* device = nullptr;  // exported device copy

  static void deleter(MT* m) {
    auto* e = static_cast<Exported*>(m->manager_ctx);
    if (e->device) gpu::end_export(e->device);
    delete e;
  }
  // An unconsumed capsule frees its tensor.
  static void capsule_destructor(PyObject* cap) {
    const char* name = std::is_same_v<MT, DLManagedTensor> ? "dltensor" : "dltensor_versioned";
    if (!PyCapsule_IsValid(cap, name)) return;
    auto* m = static_cast<MT*>(PyCapsule_GetPointer(cap, name));
    m->deleter(m);
  }
};

template <typename MT>
nb::object make_capsule(const array& x, void* data, allocator::BufferStorage* device,
                        bool read_only) {
  auto* e = new Exported<MT>{{}, x, {x.shape().begin(), x.shape().end()}, x.strides(), device};
  DLTensor& t = e->mt.dl_tensor;
  t.data = data;
  t.device = {device ? kDLCUDA : kDLCPU, 0};
  t.ndim = static_cast<int32_t>(x.ndim());
  t.dtype = to_dlpack_dtype(x.dtype());
  t.shape = e->shape.data();
  t.strides = e->strides.data();
  t.byte_offset = 0;
  e->mt.manager_ctx = e;
  e->mt.deleter = &Exported<MT>::deleter;
  const char* name = "dltensor";
  if constexpr (std::is_same_v<MT, DLManagedTensorVersioned>) {
    e->mt.version = {1, 0};
    e->mt.flags = read_only ? kReadOnly : 0;
    name = "dltensor_versioned";
  }
  PyObject* cap = PyCapsule_New(&e->mt, name, &Exported<MT>::capsule_destructor);
  if (!cap) {
    Exported<MT>::deleter(&e->mt);
    throw nb::python_error();
  }
  return nb::steal(cap);
}

}  // namespace

nb::tuple dlpack_device(const array& a) {
  array x = a;
  return nb::make_tuple(exports_on_gpu(x) ? kDLCUDA : kDLCPU, 0);
}

nb::object to_dlpack(const array& a, nb::handle stream, nb::handle max_version,
                      nb::handle dl_device, nb::handle copy) {
  array x = a;
  const bool natural_gpu = exports_on_gpu(x);
  bool to_gpu = natural_gpu;
  if (!dl_device.is_none()) {
    nb::tuple d = nb::cast<nb::tuple>(dl_device);
    int type = nb::cast<int>(d[0]), id = nb::cast<int>(d[1]);
    bool gpu_ok = type == kDLCUDA && id == 0 && is_available(Device::gpu);
    if (!gpu_ok && type != kDLCPU) {
      std::string msg = "[__dlpack__] cannot export to DLPack device " + device_text(type, id);
      throw nb::buffer_error(msg.c_str());
    }
    to_gpu = type == kDLCUDA;
  }
  const bool force_copy = !copy.is_none() && nb::cast<bool>(copy);
  if (!copy.is_none() && !force_copy && to_gpu != natural_gpu) {
    throw nb::buffer_error(
        "[__dlpack__] copy=False: the array is on the other device, a copy would be needed");
  }
  std::intptr_t consumer = kNoSync;
  if (to_gpu) {
    consumer = stream.is_none() ? kLegacyStream : nb::cast<std::intptr_t>(stream);
    if (consumer == 0) {
      throw std::invalid_argument("[__dlpack__] stream=0 is ambiguous for CUDA (DLPack)");
    }
  } else if (!stream.is_none() && nb::cast<std::intptr_t>(stream) != kNoSync) {
    throw std::invalid_argument("[__dlpack__] a stream can only be given for CUDA memory, not " +
                                nb::cast<std::string>(nb::str(stream)));
  }
  // Negative strides are valid DLPack, but many consumers (PyTorch) refuse
  // them: a contiguous copy unless copy=False.
  bool negative = false;
  for (auto s : x.strides()) negative |= s < 0;
  if (force_copy || (negative && copy.is_none())) {
    x = force_copy ? tessera::copy(x, to_gpu ? Device::gpu : Device::cpu) : contiguous(x);
    nb::gil_scoped_release nogil;
    x.eval();
  }
  void* data = nullptr;
  allocator::BufferStorage* device = nullptr;
  bool read_only = false;
  {
    nb::gil_scoped_release nogil;
    x.eval();
    if (to_gpu) {
      for (size_t i = 0; i < x.ndim(); ++i) read_only |= x.strides()[i] == 0 && x.shape()[i] > 1;
      device = x.buffer().storage();
      data = static_cast<char*>(gpu::export_device(device, consumer)) +
             x.offset() * static_cast<int64_t>(x.itemsize());
    } else if (x.size() > 0) {
      read_only = host_view_read_only(x);
      data = read_only ? x.raw_data() : x.mutable_data();  // the consumer may write it
    }
  }
  bool versioned =
      !max_version.is_none() && nb::cast<int>(nb::cast<nb::tuple>(max_version)[0]) >= 1;
  return versioned ? make_capsule<DLManagedTensorVersioned>(x, data, device, read_only)
                   : make_capsule<DLManagedTensor>(x, data, device, read_only);
}

}  // namespace tessera::python
