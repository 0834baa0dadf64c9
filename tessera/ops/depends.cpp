#include "tessera/ops/depends.h"

#include "tessera/core/primitive.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/utils.h"

namespace tessera {

namespace {

// Inputs: the n arrays passed through, then the dependencies. Outputs: views
// of the first n. Moves no data, so one definition serves both devices.
class Depends : public Primitive {
 public:
  Depends(Stream s, int n) : Primitive(s), n_(n) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override {
    for (int i = 0; i < n_; ++i) outputs[i].copy_shared_buffer(inputs[i]);
  }
  void eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) override {
    eval_cpu(inputs, outputs);
  }
  const char* name() const override { return "Depends"; }
  bool is_equivalent(const Primitive& other) const override {
    return n_ == static_cast<const Depends&>(other).n_;
  }

  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>& argnums) override {
    std::vector<array> out;
    for (int i = 0; i < n_; ++i) {
      array t = zeros_like(primals[i], stream());
      for (size_t k = 0; k < argnums.size(); ++k) {
        if (argnums[k] == i) t = tangents[k];
      }
      out.push_back(t);
    }
    return out;
  }
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums, const std::vector<array>&) override {
    std::vector<array> out;
    for (int arg : argnums) {
      out.push_back(arg < n_ ? cotangents[arg] : zeros_like(primals[arg], stream()));
    }
    return out;
  }
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override {
    std::vector<array> ins(inputs.begin(), inputs.begin() + n_);
    std::vector<array> deps(inputs.begin() + n_, inputs.end());
    return {depends(ins, deps), std::vector<int>(axes.begin(), axes.begin() + n_)};
  }

 private:
  int n_;
};

}  // namespace

std::vector<array> depends(const std::vector<array>& inputs,
                           const std::vector<array>& dependencies) {
  if (inputs.empty()) return {};
  auto [shapes, dtypes] = shapes_and_dtypes(inputs);
  std::vector<array> all = inputs;
  all.insert(all.end(), dependencies.begin(), dependencies.end());
  auto p = std::make_shared<Depends>(to_stream(std::monostate{}), static_cast<int>(inputs.size()));
  return array::make_arrays(std::move(shapes), dtypes, p, all);
}

}  // namespace tessera
