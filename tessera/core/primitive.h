// The primitive: one operation of the graph, with its kernels and its rules.
//
// A public op (ops/*.cpp) validates, promotes and broadcasts, then creates a node:
//   return array(shape, dtype, std::make_shared<Add>(to_stream(s)), {a, b});
// backend/cpu/*.cpp define eval_cpu per family; the GPU backend defines eval_gpu.
// vjp / jvp / vmap are written with public ops, so derivatives are lazy graphs too.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera {

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

 private:
  Stream stream_;
};

// A primitive with exactly one output.
class UnaryPrimitive : public Primitive {
 public:
  using Primitive::Primitive;
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

// Declares eval_gpu in a primitive class that has a GPU kernel (backend/cuda).
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

}  // namespace tessera
