// Note [cuDNN]
// cuDNN's fused attention (its "flash" engines: on Hopper, wgmma and TMA) can
// run scaled_dot_product_attention's forward and backward passes where it has
// an engine for the case; the flash kernels of attention.cuh take every other
// case. Convolutions without input dilation can run cuDNN's forward
// convolution; those with input dilation and stride 1 (the input's gradient of
// a strided convolution, and transposed convolutions), being the data gradient
// of a forward convolution, cuDNN's data gradient; and those whose kernel
// covers more positions than their output (the weight's gradient, as the vjp
// of Convolution writes it), being the weight gradient of a forward
// convolution, cuDNN's weight gradient (convolution.cpp finds those
// convolutions); the window-gathering products of convolution.cpp take the
// rest. float32
// convolutions leave out the tensor cores' (TF32) engines where
// MLX_ENABLE_TF32=0, as products do.
//
// cuDNN is reached through its frontend (a header library fetched at build
// time by scripts/fetch-cudnn-frontend), whose graphs are built once per shape
// and layout and kept for the process; a case with no engine is remembered
// too, and costs one attempt. The library itself is loaded at run time: this
// file defines the few cuDNN functions the frontend calls, each forwarding to
// the symbol of a dlopen()ed libcudnn.so.9 ($TESSERA_CUDNN_LIBRARY first; the
// Python package sets it to pip's nvidia-cudnn where one is installed).
//
// The path is the default: on an H100, cuDNN's attention ran 2.0-3.6x faster
// than the own flash kernels (decoding alike) and its forward convolutions
// 2.4-35x faster than the window products. TESSERA_CUDNN=0 turns it off; so
// do a machine without cuDNN and a build without the frontend's headers (then
// only the stubs at the end are compiled): every call stays with the own
// kernels.
#include "tessera/backend/cuda/cudnn.h"

#if defined(TESSERA_HAVE_CUDNN_FRONTEND)

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <cudnn_frontend.h>

#include "tessera/backend/cuda/device.h"
#include "tessera/backend/cuda/recording.h"
#include "tessera/backend/cuda/matmul.h"

// ---- the library, loaded at run time -----------------------------------------

namespace {

void* library() {
  static void* lib = []() -> void* {
    const char* on = std::getenv("TESSERA_CUDNN");
    if (on && std::strcmp(on, "0") == 0) return nullptr;
    void* l = nullptr;
    if (const char* path = std::getenv("TESSERA_CUDNN_LIBRARY")) {
      l = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!l) l = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    return l;
  }();
  return lib;
}

void* symbol(const char* name) {
  void* lib = library();
  return lib ? dlsym(lib, name) : nullptr;
}

}  // namespace

// The cuDNN functions the frontend calls, as cudnn.h declares them; hidden, so
// that a process that also loads cuDNN itself keeps its own.
#define TESSERA_CUDNN_HIDDEN extern "C" __attribute__((visibility("hidden")))
#define TESSERA_CUDNN_FORWARD(name, params, args)                                     \
  TESSERA_CUDNN_HIDDEN cudnnStatus_t name params {                                    \
    static auto f = reinterpret_cast<decltype(&name)>(symbol(#name));                 \
    return f ? f args : CUDNN_STATUS_NOT_INITIALIZED;                                 \
  }

TESSERA_CUDNN_FORWARD(cudnnCreate, (cudnnHandle_t * handle), (handle))
TESSERA_CUDNN_FORWARD(cudnnDestroy, (cudnnHandle_t handle), (handle))
TESSERA_CUDNN_FORWARD(cudnnSetStream, (cudnnHandle_t handle, cudaStream_t stream), (handle, stream))
TESSERA_CUDNN_FORWARD(cudnnGetStream, (cudnnHandle_t handle, cudaStream_t * stream),
                      (handle, stream))
TESSERA_CUDNN_FORWARD(cudnnBackendCreateDescriptor,
                      (cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t* d), (type, d))
TESSERA_CUDNN_FORWARD(cudnnBackendDestroyDescriptor, (cudnnBackendDescriptor_t d), (d))
TESSERA_CUDNN_FORWARD(cudnnBackendInitialize, (cudnnBackendDescriptor_t d), (d))
TESSERA_CUDNN_FORWARD(cudnnBackendFinalize, (cudnnBackendDescriptor_t d), (d))
TESSERA_CUDNN_FORWARD(cudnnBackendSetAttribute,
                      (cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                       cudnnBackendAttributeType_t type, int64_t count, const void* values),
                      (d, name, type, count, values))
TESSERA_CUDNN_FORWARD(cudnnBackendGetAttribute,
                      (cudnnBackendDescriptor_t const d, cudnnBackendAttributeName_t name,
                       cudnnBackendAttributeType_t type, int64_t requested, int64_t* count,
                       void* values),
                      (d, name, type, requested, count, values))
TESSERA_CUDNN_FORWARD(cudnnBackendExecute,
                      (cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                       cudnnBackendDescriptor_t pack),
                      (handle, plan, pack))
TESSERA_CUDNN_FORWARD(cudnnDestroyFilterDescriptor, (cudnnFilterDescriptor_t d), (d))

TESSERA_CUDNN_HIDDEN size_t cudnnGetVersion() {
  static auto f = reinterpret_cast<decltype(&cudnnGetVersion)>(symbol("cudnnGetVersion"));
  return f ? f() : 0;
}
TESSERA_CUDNN_HIDDEN const char* cudnnGetErrorString(cudnnStatus_t status) {
  static auto f = reinterpret_cast<decltype(&cudnnGetErrorString)>(symbol("cudnnGetErrorString"));
  return f ? f(status) : "cuDNN is not loaded";
}
TESSERA_CUDNN_HIDDEN void cudnnGetLastErrorString(char* message, size_t max_size) {
  static auto f =
      reinterpret_cast<decltype(&cudnnGetLastErrorString)>(symbol("cudnnGetLastErrorString"));
  if (f) {
    f(message, max_size);
  } else if (max_size > 0) {
    message[0] = '\0';
  }
}

#undef TESSERA_CUDNN_FORWARD
#undef TESSERA_CUDNN_HIDDEN

namespace tessera::gpu::cudnn {

namespace fe = cudnn_frontend;

namespace {

// cuDNN 9 and a device it has flash engines for (sm_80 on).
bool usable() {
  static const bool yes = [] {
    if (!library()) return false;
    const size_t version = cudnnGetVersion();
    if (version < 90000) return false;
    cudnnHandle_t h = nullptr;
    if (cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) return false;
    cudnnDestroy(h);
    return gpu::properties().major >= 8;
  }();
  return yes;
}

// One handle per thread (the stream workers), set to the caller's stream.
cudnnHandle_t handle(cudaStream_t stream) {
  struct Handle {
    cudnnHandle_t h = nullptr;
    ~Handle() {
      if (h) cudnnDestroy(h);
    }
  };
  thread_local Handle owned;
  if (!owned.h && cudnnCreate(&owned.h) != CUDNN_STATUS_SUCCESS) {
    owned.h = nullptr;
    throw std::runtime_error("[cudnn] could not create a cuDNN handle");
  }
  cudnnSetStream(owned.h, stream);
  return owned.h;
}

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kBias, kDo, kDq, kDk, kDv, kX, kW, kY };

fe::DataType_t fe_type(Dtype t) {
  return t == float16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16;
}

std::vector<int64_t> row_major(std::vector<int64_t> dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

std::vector<int64_t> of(const int64_t (&a)[4]) { return {a[0], a[1], a[2], a[3]}; }

// Everything a built graph depends on.
std::vector<int64_t> key(const Attention& a, bool backward) {
  int32_t scale_bits;
  std::memcpy(&scale_bits, &a.scale, sizeof(scale_bits));
  std::vector<int64_t> k = {backward,
                            static_cast<int64_t>(a.dtype.val),
                            a.b,
                            a.hq,
                            a.hkv,
                            a.tq,
                            a.tkv,
                            a.d,
                            scale_bits,
                            static_cast<int64_t>(a.mask)};
  for (const int64_t(*s)[4] : {&a.q_strides, &a.k_strides, &a.v_strides, &a.o_strides,
                               &a.bias_dims, &a.bias_strides, &a.do_strides}) {
    k.insert(k.end(), std::begin(*s), std::end(*s));
  }
  return k;
}

struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;  // null: cuDNN has no engine for the case
  int64_t workspace = 0;
};

bool good(fe::error_t e, const char* what) {
  if (e.is_good()) return true;
  if (std::getenv("TESSERA_CUDNN_VERBOSE")) {
    std::fprintf(stderr, "[cudnn] %s: %s\n", what, e.get_message().c_str());
  }
  return false;
}

Plan finish(std::shared_ptr<fe::graph::Graph> g, cudnnHandle_t h, bool no_tf32 = false);

Plan build(const Attention& a, bool backward, cudnnHandle_t h) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe_type(a.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto tensor = [&](const char* name, Uid uid, std::vector<int64_t> dims,
                    std::vector<int64_t> strides) {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_name(name)
                         .set_uid(uid)
                         .set_dim(std::move(dims))
                         .set_stride(std::move(strides)));
  };
  const std::vector<int64_t> q_dims = {a.b, a.hq, a.tq, a.d};
  const std::vector<int64_t> kv_dims = {a.b, a.hkv, a.tkv, a.d};
  const std::vector<int64_t> stats_dims = {a.b, a.hq, a.tq, 1};
  auto q = tensor("q", kQ, q_dims, of(a.q_strides));
  auto k = tensor("k", kK, kv_dims, of(a.k_strides));
  auto v = tensor("v", kV, kv_dims, of(a.v_strides));
  std::shared_ptr<fe::graph::Tensor_attributes> bias;
  if (a.mask == Attention::Mask::bias) {
    bias = tensor("bias", kBias, of(a.bias_dims), of(a.bias_strides));
  }
  // Causal masks align to the end of the keys (MLX); with as many queries as
  // keys that is also the top-left diagonal, which more engines take.
  auto set_mask = [&](auto& attributes) {
    if (a.mask == Attention::Mask::causal) {
      if (a.tq == a.tkv) {
        attributes.set_causal_mask(true);
      } else {
        attributes.set_causal_mask_bottom_right(true);
      }
    }
    if (bias) attributes.set_bias(bias);
  };
  if (!backward) {
    fe::graph::SDPA_attributes attributes;
    attributes.set_name("attention").set_generate_stats(true).set_attn_scale(a.scale);
    set_mask(attributes);
    auto [o, stats] = g->sdpa(q, k, v, attributes);
    o->set_output(true).set_dim(q_dims).set_stride(of(a.o_strides)).set_uid(kO);
    stats->set_output(true)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(stats_dims)
        .set_stride(row_major(stats_dims))
        .set_uid(kStats);
  } else {
    auto o = tensor("o", kO, q_dims, of(a.o_strides));
    auto d_o = tensor("d_o", kDo, q_dims, of(a.do_strides));
    auto stats = tensor("stats", kStats, stats_dims, row_major(stats_dims));
    stats->set_data_type(fe::DataType_t::FLOAT);
    fe::graph::SDPA_backward_attributes attributes;
    attributes.set_name("attention_backward").set_attn_scale(a.scale);
    set_mask(attributes);
    auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, d_o, stats, attributes);
    dq->set_output(true).set_dim(q_dims).set_stride(row_major(q_dims)).set_uid(kDq);
    dk->set_output(true).set_dim(kv_dims).set_stride(row_major(kv_dims)).set_uid(kDk);
    dv->set_output(true).set_dim(kv_dims).set_stride(row_major(kv_dims)).set_uid(kDv);
  }
  return finish(std::move(g), h);
}

// The plan for a case (its key: everything the graph depends on), built on
// first use by build; a failed build is kept too, so a case cuDNN cannot take
// costs one attempt.
template <typename Build>
const Plan& plan_for(std::vector<int64_t> k, Build build) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, Plan> plans;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = plans.find(k);
  if (it == plans.end()) {
    Plan p;
    try {
      p = build();
    } catch (const std::exception& e) {
      if (std::getenv("TESSERA_CUDNN_VERBOSE")) std::fprintf(stderr, "[cudnn] %s\n", e.what());
      p = Plan{};
    }
    it = plans.emplace(std::move(k), std::move(p)).first;
  }
  return it->second;
}

// Runs a built plan on s; false (nothing queued) where there is none.
template <typename Build>
bool run(std::vector<int64_t> k, Build build, std::unordered_map<int64_t, void*>& pack,
         const Stream& s, const char* op, const char* what) {
  if (!usable()) return false;
  // cuDNN may synchronise while it runs a plan: nothing of it is recorded.
  gpu::NoRecording no_recording;
  cudaStream_t cs = gpu::cuda_stream(s);
  cudnnHandle_t h = handle(cs);
  const Plan& plan = plan_for(std::move(k), [&] { return build(h); });
  if (!plan.graph) return false;
  void* workspace = plan.workspace > 0 ? gpu::scratch(plan.workspace, s) : nullptr;
  fe::error_t e = plan.graph->execute(h, pack, workspace);
  // A plan that cannot be launched (nothing was queued) leaves the call to
  // the own kernels, with a word on stderr.
  if (!e.is_good()) {
    std::fprintf(stderr, "[%s] cuDNN %s could not run (%s); Tessera's kernel runs instead\n", op,
                 what, e.get_message().c_str());
    return false;
  }
  return true;
}

// Validates and builds g with the heuristics' first engine that supports it
// (leaving out the tensor cores' engines for no_tf32: float32 exactly).
Plan finish(std::shared_ptr<fe::graph::Graph> g, cudnnHandle_t h, bool no_tf32) {
  Plan plan;
  if (!good(g->validate(), "validate") || !good(g->build_operation_graph(h), "operation graph") ||
      !good(g->create_execution_plans({fe::HeurMode_t::A}), "execution plans")) {
    return plan;
  }
  if (no_tf32) g->deselect_numeric_notes({fe::NumericalNote_t::TENSOR_CORE});
  if (!good(g->check_support(), "support") || !good(g->build_plans(), "build plans") ||
      !good(g->get_workspace_size(plan.workspace), "workspace")) {
    return plan;
  }
  plan.graph = std::move(g);
  return plan;
}

// ---- convolution -------------------------------------------------------------

// What a convolution graph computes: y from x and w, dx from dy and w, or dw
// from x and dy.
enum class Pass { forward, data, filter };

std::vector<int64_t> conv_key(const Convolution& c, Pass pass) {
  std::vector<int64_t> k = {2 + static_cast<int64_t>(pass), static_cast<int64_t>(c.dtype.val),
                            c.groups, c.flip,
                            c.dtype == float32 && !gpu::tf32_enabled()};
  for (const auto* v : {&c.x_shape, &c.w_shape, &c.y_shape, &c.stride, &c.padding_lo,
                        &c.padding_hi, &c.dilation}) {
    k.push_back(static_cast<int64_t>(v->size()));
    k.insert(k.end(), v->begin(), v->end());
  }
  return k;
}

// cuDNN's dims (N, C, spatial...) with strides of Tessera's channels-last
// layout; a 1-D convolution gets a unit spatial axis in front (cuDNN wants 2).
std::pair<std::vector<int64_t>, std::vector<int64_t>> channels_last(std::vector<int64_t> shape,
                                                                     bool one_d) {
  if (one_d) shape.insert(shape.begin() + 1, 1);
  const std::vector<int64_t> rm = row_major(shape);
  std::vector<int64_t> dims = {shape.front(), shape.back()}, strides = {rm.front(), rm.back()};
  for (size_t i = 1; i + 1 < shape.size(); ++i) {
    dims.push_back(shape[i]);
    strides.push_back(rm[i]);
  }
  return {dims, strides};
}

Plan build_conv(const Convolution& c, Pass pass, cudnnHandle_t h) {
  const bool one_d = c.x_shape.size() == 3;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(c.dtype == float32 ? fe::DataType_t::FLOAT : fe_type(c.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto tensor = [&](const char* name, Uid uid, const std::vector<int64_t>& shape) {
    auto [dims, strides] = channels_last(shape, one_d);
    return g->tensor(
        fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dims).set_stride(
            strides));
  };
  auto widen = [&](std::vector<int64_t> v, int64_t unit) {
    if (one_d) v.insert(v.begin(), unit);
    return v;
  };
  auto set = [&](auto& attributes) {
    attributes.set_pre_padding(widen(c.padding_lo, 0))
        .set_post_padding(widen(c.padding_hi, 0))
        .set_stride(widen(c.stride, 1))
        .set_dilation(widen(c.dilation, 1))
        .set_convolution_mode(c.flip ? fe::ConvolutionMode_t::CONVOLUTION
                                     : fe::ConvolutionMode_t::CROSS_CORRELATION);
  };
  std::shared_ptr<fe::graph::Tensor_attributes> out;
  if (pass == Pass::forward) {
    fe::graph::Conv_fprop_attributes attributes;
    set(attributes.set_name("convolution"));
    out = g->conv_fprop(tensor("x", kX, c.x_shape), tensor("w", kW, c.w_shape), attributes);
  } else if (pass == Pass::data) {
    fe::graph::Conv_dgrad_attributes attributes;
    set(attributes.set_name("convolution_dgrad"));
    out = g->conv_dgrad(tensor("dy", kY, c.y_shape), tensor("w", kW, c.w_shape), attributes);
  } else {
    fe::graph::Conv_wgrad_attributes attributes;
    set(attributes.set_name("convolution_wgrad"));
    out = g->conv_wgrad(tensor("dy", kY, c.y_shape), tensor("x", kX, c.x_shape), attributes);
  }
  const std::vector<int64_t>& shape =
      pass == Pass::forward ? c.y_shape : pass == Pass::data ? c.x_shape : c.w_shape;
  auto [dims, strides] = channels_last(shape, one_d);
  const Uid uid = pass == Pass::forward ? kY : pass == Pass::data ? kX : kW;
  out->set_output(true).set_dim(dims).set_stride(strides).set_uid(uid);
  return finish(std::move(g), h, c.dtype == float32 && !gpu::tf32_enabled());
}

}  // namespace

bool available() { return usable(); }

bool attention_forward(const Attention& a, const AttentionPointers& p, const Stream& s,
                       const char* op) {
  std::unordered_map<int64_t, void*> pack = {{kQ, const_cast<void*>(p.q)},
                                             {kK, const_cast<void*>(p.k)},
                                             {kV, const_cast<void*>(p.v)},
                                             {kO, p.o},
                                             {kStats, p.lse}};
  if (a.mask == Attention::Mask::bias) pack[kBias] = const_cast<void*>(p.bias);
  return run(key(a, false), [&](cudnnHandle_t h) { return build(a, false, h); }, pack, s, op,
             "attention");
}

bool attention_backward(const Attention& a, const AttentionPointers& p, const Stream& s,
                        const char* op) {
  std::unordered_map<int64_t, void*> pack = {
      {kQ, const_cast<void*>(p.q)}, {kK, const_cast<void*>(p.k)}, {kV, const_cast<void*>(p.v)},
      {kO, p.o},  {kStats, p.lse},  {kDo, const_cast<void*>(p.d_o)},
      {kDq, p.dq}, {kDk, p.dk},     {kDv, p.dv}};
  if (a.mask == Attention::Mask::bias) pack[kBias] = const_cast<void*>(p.bias);
  return run(key(a, true), [&](cudnnHandle_t h) { return build(a, true, h); }, pack, s, op,
             "attention");
}

namespace {

// The convolution graph of `pass` on x, w and y (two read, the third written).
bool run_conv(const Convolution& c, Pass pass, const void* x, const void* w, const void* y,
              const Stream& s, const char* op) {
  std::unordered_map<int64_t, void*> pack = {
      {kX, const_cast<void*>(x)}, {kW, const_cast<void*>(w)}, {kY, const_cast<void*>(y)}};
  return run(conv_key(c, pass), [&](cudnnHandle_t h) { return build_conv(c, pass, h); }, pack, s,
             op, "convolution");
}

}  // namespace

bool convolution_forward(const Convolution& c, const void* x, const void* w, void* y,
                         const Stream& s, const char* op) {
  return run_conv(c, Pass::forward, x, w, y, s, op);
}

bool convolution_backward_data(const Convolution& c, const void* dy, const void* w, void* dx,
                               const Stream& s, const char* op) {
  return run_conv(c, Pass::data, dx, w, dy, s, op);
}

bool convolution_backward_filter(const Convolution& c, const void* x, const void* dy, void* dw,
                                 const Stream& s, const char* op) {
  return run_conv(c, Pass::filter, x, dw, dy, s, op);
}

}  // namespace tessera::gpu::cudnn

#else  // a build without cuDNN's frontend: the own kernels take every case

namespace tessera::gpu::cudnn {

bool available() { return false; }
bool attention_forward(const Attention&, const AttentionPointers&, const Stream&, const char*) {
  return false;
}
bool attention_backward(const Attention&, const AttentionPointers&, const Stream&, const char*) {
  return false;
}
bool convolution_forward(const Convolution&, const void*, const void*, void*, const Stream&,
                         const char*) {
  return false;
}
bool convolution_backward_data(const Convolution&, const void*, const void*, void*, const Stream&,
                               const char*) {
  return false;
}
bool convolution_backward_filter(const Convolution&, const void*, const void*, void*,
                                 const Stream&, const char*) {
  return false;
}

}  // namespace tessera::gpu::cudnn

#endif
