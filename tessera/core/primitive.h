// The primitive: one operation of the graph, with its kernels and its rules.
//
// A public op (ops/*.cpp) validates, promotes and broadcasts, then creates a node:
//   return array(shape, dtype, std::make_shared<Add>(to_stream(s)), {a, b});
// The CPU backend defines eval_cpu per family; the GPU backend defines eval_gpu.
// vjp / jvp / vmap are written with public ops, so derivatives are lazy graphs too.
#pragma once

#include <ostream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera {

class UnaryPrimitive;

class Primitive {
 public:
  explicit Primitive(Stream stream) : stream_(stream) {}
  virtual ~Primitive() = default;
  Primitive(const Primitive&) = delete;
  Primitive& operator=(const Primitive&) = delete;

  const Stream& stream() const { return stream_; }
  Device device() const { return stream_.device; }

  // Kernels: fill in the data of outputs (allocate, or view/donate an input).
  virtual void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) = 0;
  virtual void eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs);

  // Transform rules. The defaults throw, naming the primitive.
  virtual std::vector<array> jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents,
                                 const std::vector<int>& argnums);
  virtual std::vector<array> vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>& argnums,
                                 const std::vector<array>& outputs);
  virtual std::pair<std::vector<array>, std::vector<int>> vmap(
      const std::vector<array>& inputs, const std::vector<int>& axes);

  virtual const char* name() const = 0;
  virtual void print(std::ostream& os) const { os << name(); }
  // Same type and parameters (for common-subexpression elimination).
  virtual bool is_equivalent(const Primitive& other) const { return false; }
  // Output shapes from input shapes (for shapeless compile).
  virtual std::vector<Shape> output_shapes(const std::vector<array>& inputs);

  // This primitive as a UnaryPrimitive, or null: eval runs a single output's
  // kernel without a vector of outputs.
  UnaryPrimitive* as_unary() const { return unary_; }
  // Whether its output is a view of its one input, made on any device by
  // eval_cpu without moving data (TESSERA_VIEW_PRIMITIVE).
  virtual bool is_view() const { return false; }

 protected:
  UnaryPrimitive* unary_ = nullptr;

 private:
  Stream stream_;
};

// A primitive with exactly one output.
class UnaryPrimitive : public Primitive {
 public:
  explicit UnaryPrimitive(Stream stream) : Primitive(stream) { unary_ = this; }
  virtual void eval_cpu(const std::vector<array>& inputs, array& out) = 0;
  virtual void eval_gpu(const std::vector<array>& inputs, array& out);

  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) final {
    eval_cpu(inputs, outputs[0]);
  }
  void eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) final {
    eval_gpu(inputs, outputs[0]);
  }
};

// Declares the three transform rules in a primitive class; each family
// defines them in ops/rules/<family>.cpp.
#define TESSERA_TRANSFORM_RULES                                                 \
  std::vector<array> jvp(const std::vector<array>& primals,                     \
                         const std::vector<array>& tangents,                    \
                         const std::vector<int>& argnums) override;             \
  std::vector<array> vjp(const std::vector<array>& primals,                     \
                         const std::vector<array>& cotangents,                  \
                         const std::vector<int>& argnums,                       \
                         const std::vector<array>& outputs) override;           \
  std::pair<std::vector<array>, std::vector<int>> vmap(                         \
      const std::vector<array>& inputs, const std::vector<int>& axes) override;

// Declares name() for a primitive class: TESSERA_PRIMITIVE_NAME(Add)
#define TESSERA_PRIMITIVE_NAME(NAME) \
  const char* name() const override { return #NAME; }

// The one message for a kernel a backend lacks.
[[noreturn]] void throw_no_implementation(const Primitive& p, const char* backend);

// Declares eval_gpu in a primitive class that has a GPU kernel (the CUDA backend).
// A build without the CUDA backend declares none: the base class's eval_gpu
// then says that the primitive has no GPU implementation, with no stub per
// primitive. A primitive without a GPU kernel in a CUDA build simply does not
// declare it: that absence is the one greppable marker of a gap.
#if defined(TESSERA_CUDA) && TESSERA_CUDA
#define TESSERA_EVAL_GPU void eval_gpu(const std::vector<array>& inputs, array& out) override;
#define TESSERA_EVAL_GPU_MULTI \
  void eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
#else
#define TESSERA_EVAL_GPU
#define TESSERA_EVAL_GPU_MULTI
#endif

// Declares the members that every primitive with one output restates: its CPU
// kernel, its GPU kernel where the build has one, its name, its
// transform rules (ops/rules/<family>.cpp) and the members that hold its
// parameters (TESSERA_PARAMETERS). A whole primitive reads:
//   class Concatenate : public UnaryPrimitive {
//    public:
//     Concatenate(Stream s, int axis) : UnaryPrimitive(s), axis_(axis) {}
//     TESSERA_PRIMITIVE(Concatenate, axis_)
//     int axis() const { return axis_; }
//    private:
//     int axis_;
//   };
#define TESSERA_PRIMITIVE(NAME, ...) \
  TESSERA_PRIMITIVE_KERNELS(NAME)    \
  TESSERA_TRANSFORM_RULES            \
  TESSERA_PARAMETERS(__VA_ARGS__)
// The same without transform rules (the base class's throw, naming the primitive).
#define TESSERA_PRIMITIVE_NO_RULES(NAME, ...) \
  TESSERA_PRIMITIVE_KERNELS(NAME)             \
  TESSERA_PARAMETERS(__VA_ARGS__)
// The same for a primitive with several outputs.
#define TESSERA_PRIMITIVE_MULTI(NAME, ...)                                               \
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override; \
  TESSERA_EVAL_GPU_MULTI                                                                 \
  TESSERA_PRIMITIVE_NAME(NAME)                                                           \
  TESSERA_TRANSFORM_RULES                                                                \
  TESSERA_PARAMETERS(__VA_ARGS__)
// The same for a primitive whose output is a view of its input (Note [Strides
// and flags]): it moves no data, so one kernel, eval_view (defined beside the
// views that both backends share), serves every device.
#define TESSERA_VIEW_PRIMITIVE(NAME, ...)                                                   \
  void eval_view(const array& in, array& out);                                             \
  void eval_cpu(const std::vector<array>& inputs, array& out) override { eval_view(inputs[0], out); } \
  void eval_gpu(const std::vector<array>& inputs, array& out) override { eval_view(inputs[0], out); } \
  bool is_view() const override { return true; }                                            \
  TESSERA_PRIMITIVE_NAME(NAME)                                                              \
  TESSERA_TRANSFORM_RULES                                                                   \
  TESSERA_PARAMETERS(__VA_ARGS__)
// The kernels and the name alone.
#define TESSERA_PRIMITIVE_KERNELS(NAME)                                  \
  void eval_cpu(const std::vector<array>& inputs, array& out) override; \
  TESSERA_EVAL_GPU                                                      \
  TESSERA_PRIMITIVE_NAME(NAME)

// Names the members that hold a primitive's parameters, and so defines
// is_equivalent: two nodes of the type are equivalent when these are equal
// (with none named, always): TESSERA_PARAMETERS(start_, stop_, strides_)
#define TESSERA_PARAMETERS(...)                                           \
  auto parameters() const { return std::tie(__VA_ARGS__); }               \
  bool is_equivalent(const Primitive& other) const override {             \
    using Self = std::remove_cvref_t<decltype(*this)>;                    \
    return parameters() == dynamic_cast<const Self&>(other).parameters(); \
  }

}  // namespace tessera
