// eval_cpu of Compiled: an interpreter of the fused program that runs every
// step over one block of the output at a time, so that intermediate values
// stay in the cache (Note [Fused programs] in ops/primitives/compiled.h).
//
// Note [Fused interpreter]
// The output is cut into blocks of kBlockBytes of the widest register type.
// A register is a block buffer: a linear input is read in place, a strided or
// broadcast one is gathered into a buffer, a scalar one is filled once per
// thread (and a binary step reads it as one value, as the unfused kernel's
// scalar loop does), and the last step writes into the output. Each step is one call of
// a loop monomorphic in its op and types (chosen once per call, before any
// element is touched), running the same scalar functor as the unfused kernel
// with the same conversions, so the results are the unfused ones bit for bit.
// A buffer is reused once the last step that reads it has run. A step whose
// register is an output writes into that output, where later steps read it.
// Outputs of kStreamBytes or more in all are computed into buffers too and
// copied out with
// stores that bypass the cache: it cannot stay in the cache, and a plain
// store reads each line from memory before writing it (3 to 6% of a
// compiled GELU over 2^24 floats on 2 cores, bench/compile_fusion.py).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tessera/backend/common/elementwise.h"
#include "tessera/backend/common/fused_layout.h"
#include "tessera/backend/cpu/select.h"
#include "tessera/backend/cpu/threading.h"
#include "tessera/backend/cpu/vector_math.h"
#include "tessera/core/dispatch.h"
#include "tessera/ops/primitives/compiled.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tessera {

namespace {

constexpr int64_t kBlockBytes = 8192;
constexpr int64_t kGrainElements = 1 << 16;
// An output at least this large is streamed (Note [Fused interpreter]).
constexpr int64_t kStreamBytes = int64_t{8} << 20;

// dst[0, bytes) = src[0, bytes) with stores that bypass the cache where the
// machine has them.
void stream_copy(const char* src, char* dst, int64_t bytes) {
#if defined(__SSE2__)
  const int64_t head =
      std::min<int64_t>(bytes, (16 - reinterpret_cast<std::uintptr_t>(dst) % 16) % 16);
  std::memcpy(dst, src, head);
  int64_t i = head;
  for (; i + 16 <= bytes; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
  }
  std::memcpy(dst + i, src + i, bytes - i);
#else
  std::memcpy(dst, src, bytes);
#endif
}

// form: which operands of a binary step are one value (a scalar input),
// read as such so that the loop is the unfused kernel's for that case.
using StepFn = void (*)(const void* const* args, void* out, int64_t n, const FusedStep& step,
                        Dtype in, cpu::Operands form);

// The functor of a step, with its parameters in the order of its members
// (the order fused_params records and the GPU source writes them in).
template <typename Op>
Op functor(const FusedStep& step) {
  const std::vector<double>& p = step.params;
  if constexpr (std::is_same_v<Op, scalar::Round>) {
    return Op{{}, static_cast<int>(p[0])};
  } else if constexpr (std::is_same_v<Op, scalar::NanToNum>) {
    return Op{{}, p[0], p[1], p[2]};
  } else if constexpr (std::is_same_v<Op, scalar::IsClose>) {
    return Op{{}, p[0], p[1], p[2] != 0};
  } else {
    return Op{};
  }
}

// The stored result type of Op on operands of stored type In: the functor's
// result, except that a result of In's compute type is stored as In (the
// rule of the unfused kernels, backend/cpu/unary.cpp and binary.cpp).
template <typename Op, typename In, int Arity>
struct StepOut {
  using C = compute_t<In>;
  static auto result() {
    if constexpr (Arity == 1) {
      return Op{}(C{});
    } else {
      return Op{}(C{}, C{});
    }
  }
  using R = decltype(result());
  using type = std::conditional_t<std::is_same_v<R, C>, In, R>;
};

template <typename Op, typename In>
void unary_step(const void* const* args, void* out, int64_t n, const FusedStep& step, Dtype,
                cpu::Operands) {
  using Out = typename StepOut<Op, In, 1>::type;
  cpu::unary_span(static_cast<const In*>(args[0]), static_cast<Out*>(out), n, functor<Op>(step));
}

template <typename Op, typename In>
void binary_step(const void* const* args, void* out, int64_t n, const FusedStep& step, Dtype,
                 cpu::Operands form) {
  using Out = typename StepOut<Op, In, 2>::type;
  cpu::binary_span(static_cast<const In*>(args[0]), static_cast<const In*>(args[1]),
                   static_cast<Out*>(out), n, form, functor<Op>(step));
}

template <typename T>
void select_step(const void* const* args, void* out, int64_t n, const FusedStep&, Dtype,
                 cpu::Operands) {
  cpu::select_row(static_cast<const bool*>(args[0]), static_cast<const T*>(args[1]),
                  static_cast<const T*>(args[2]), static_cast<T*>(out), n, {1, 1, 1, 1});
}

void astype_step(const void* const* args, void* out, int64_t n, const FusedStep& step, Dtype in,
                 cpu::Operands) {
  cast_contiguous(args[0], in, out, step.dtype, static_cast<size_t>(n));
}

template <typename Op, int Arity>
StepFn resolve(Dtype in, Dtype out, const char* name) {
  StepFn fn = nullptr;
  dispatch_supported<Op>(in, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Out = typename StepOut<Op, T, Arity>::type;
    if (detail::exact_dtype<Out> != out) {
      throw std::logic_error(std::string("[compile] the fused ") + name + " stores " +
                             dtype_name(detail::exact_dtype<Out>) + ", the graph " +
                             dtype_name(out) + " (bug)");
    }
    if constexpr (Arity == 1) {
      fn = &unary_step<Op, T>;
    } else {
      fn = &binary_step<Op, T>;
    }
  });
  return fn;
}

// The loop of one step whose first operand has dtype `in` (Select: its
// second); null for a step that only renames its operand.
StepFn step_fn(const FusedStep& step, Dtype in) {
  switch (step.op) {
#define TESSERA_UNARY_ROW(NAME, FN, RULE) \
  case FusedOp::NAME:                     \
    return resolve<scalar::NAME, 1>(in, step.dtype, #FN);
    TESSERA_UNARY_OPS(TESSERA_UNARY_ROW)
#undef TESSERA_UNARY_ROW
#define TESSERA_BINARY_ROW(NAME, FN, RULE) \
  case FusedOp::NAME:                      \
    return resolve<scalar::NAME, 2>(in, step.dtype, #FN);
    TESSERA_BINARY_OPS(TESSERA_BINARY_ROW)
#undef TESSERA_BINARY_ROW
    case FusedOp::Equal:
      return resolve<scalar::Equal, 2>(in, step.dtype, "equal");
    case FusedOp::EqualNan:
      return resolve<scalar::EqualNan, 2>(in, step.dtype, "equal");
    case FusedOp::Round:
      return resolve<scalar::Round, 1>(in, step.dtype, "round");
    case FusedOp::NanToNum:
      return resolve<scalar::NanToNum, 1>(in, step.dtype, "nan_to_num");
    case FusedOp::IsClose:
      return resolve<scalar::IsClose, 2>(in, step.dtype, "isclose");
    case FusedOp::Select:
      return dispatch_bytes(step.dtype, [](auto tag) -> StepFn {
        return &select_step<typename decltype(tag)::type>;
      });
    case FusedOp::AsType:
      return &astype_step;
    case FusedOp::Broadcast:
    case FusedOp::Copy:
      return nullptr;
  }
  throw std::logic_error("[compile] unknown fused op (bug)");
}

// n elements of a strided input from flat output index `start` on.
template <typename T>
void gather(const T* src, const Shape& shape, const Strides& st, int64_t start, int64_t n,
            T* dst) {
  const int nd = static_cast<int>(shape.size());
  int64_t idx_small[16];
  std::vector<int64_t> idx_large(nd > 16 ? nd : 0);
  int64_t* idx = nd > 16 ? idx_large.data() : idx_small;
  int64_t loc = 0, r = start;
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = r % shape[d];
    r /= shape[d];
    loc += idx[d] * st[d];
  }
  const int64_t inner = shape[nd - 1], step = st[nd - 1];
  for (int64_t done = 0; done < n;) {
    const int64_t m = std::min(n - done, inner - idx[nd - 1]);
    const T* p = src + loc;
    if (step == 1) {
      std::memcpy(dst + done, p, m * sizeof(T));
    } else {
      for (int64_t k = 0; k < m; ++k) dst[done + k] = p[k * step];
    }
    done += m;
    loc += m * step;
    idx[nd - 1] += m;
    if (idx[nd - 1] < inner) continue;
    loc -= inner * step;
    idx[nd - 1] = 0;
    for (int d = nd - 2; d >= 0; --d) {
      loc += st[d];
      if (++idx[d] < shape[d]) break;
      loc -= shape[d] * st[d];
      idx[d] = 0;
    }
  }
}

// Where each register lives during a block (Note [Fused interpreter]).
struct Plan {
  enum Kind : uint8_t { in_place, gathered, filled, computed, alias, output };
  struct Register {
    Kind kind;
    int slot = -1;        // buffer (gathered, filled, computed; output when streamed)
    uint32_t source = 0;  // alias: the register it renames
    int output = -1;      // output: its position among the node's outputs
    size_t itemsize = 0;
  };
  std::vector<Register> regs;
  std::vector<StepFn> fns;
  std::vector<Dtype> in_dtypes;
  std::vector<cpu::Operands> forms;
  int slots = 0;
  bool streamed = false;  // outputs computed into slots, then streamed out
  int64_t block = 0;      // elements
};

Plan make_plan(const FusedProgram& prog, const FusedLayout& layout,
               const std::vector<array>& inputs, const Compiled& c) {
  Plan plan;
  const uint32_t n_in = prog.num_inputs;
  const uint32_t n_regs = n_in + static_cast<uint32_t>(prog.steps.size());
  const std::vector<uint32_t> outputs = prog.output_registers();
  // The register that holds each register's data (a Broadcast renames its
  // operand's), and the last step that reads it.
  std::vector<uint32_t> owner(n_regs);
  std::vector<size_t> last_read(n_regs, 0);
  for (uint32_t r = 0; r < n_regs; ++r) {
    const bool renames = r >= n_in && Compiled::renames(prog.steps[r - n_in].op);
    owner[r] = renames ? owner[prog.steps[r - n_in].args[0]] : r;
  }
  for (size_t j = 0; j < prog.steps.size(); ++j) {
    for (uint32_t r : prog.steps[j].args) last_read[owner[r]] = j;
  }
  std::vector<int> output_of(n_regs, -1);
  int64_t output_bytes = 0;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const uint32_t r = outputs[k];
    if (r < n_in || Compiled::renames(prog.steps[r - n_in].op) || output_of[r] >= 0) {
      throw std::logic_error("[compile] a fused output is not a computed step of its own (bug)");
    }
    output_of[r] = static_cast<int>(k);
    output_bytes += layout.size * static_cast<int64_t>(prog.steps[r - n_in].dtype.size);
  }
  if (output_of[n_regs - 1] < 0) {
    throw std::logic_error("[compile] a fused program's last step is not an output (bug)");
  }
  plan.streamed = output_bytes >= kStreamBytes;
  size_t widest = 1;
  for (uint32_t r = 0; r < n_regs; ++r) widest = std::max<size_t>(widest, c.register_dtype(inputs, r).size);
  plan.block = kBlockBytes / static_cast<int64_t>(widest);

  std::vector<int> free_slots;
  auto take = [&] {
    if (free_slots.empty()) return plan.slots++;
    int s = free_slots.back();
    free_slots.pop_back();
    return s;
  };
  plan.regs.resize(n_regs);
  for (uint32_t k = 0; k < n_in; ++k) {
    auto& reg = plan.regs[k];
    reg.itemsize = inputs[k].itemsize();
    reg.kind = layout.access[k] == FusedAccess::linear   ? Plan::in_place
               : layout.access[k] == FusedAccess::scalar ? Plan::filled
                                                         : Plan::gathered;
    if (reg.kind != Plan::in_place) reg.slot = take();
  }
  for (size_t j = 0; j < prog.steps.size(); ++j) {
    const FusedStep& step = prog.steps[j];
    const uint32_t r = n_in + static_cast<uint32_t>(j);
    auto& reg = plan.regs[r];
    reg.itemsize = step.dtype.size;
    const uint32_t operand = step.op == FusedOp::Select ? step.args[1] : step.args[0];
    Dtype in = c.register_dtype(inputs, operand);
    plan.in_dtypes.push_back(in);
    plan.fns.push_back(step_fn(step, in));
    // A binary step over one scalar input and one block reads the scalar as
    // one value (over two scalars: two filled blocks).
    auto scalar = [&](uint32_t a) { return plan.regs[owner[a]].kind == Plan::filled; };
    cpu::Operands form = cpu::Operands::vectors;
    if (step.args.size() == 2 && scalar(step.args[0]) != scalar(step.args[1])) {
      form = scalar(step.args[0]) ? cpu::Operands::scalar_vector : cpu::Operands::vector_scalar;
    }
    plan.forms.push_back(form);
    if (Compiled::renames(step.op)) {
      reg.kind = Plan::alias;
      reg.source = owner[r];
    } else if (output_of[r] >= 0) {
      reg.kind = Plan::output;
      reg.output = output_of[r];
      if (plan.streamed) reg.slot = plan.slots++;  // never freed: copied out after the block
    } else {
      reg.kind = Plan::computed;
      reg.slot = take();
    }
    // A buffer whose last reader is this step is free for the next steps
    // (a scalar input keeps its buffer: it is filled once per thread).
    for (uint32_t a : step.args) {
      const auto& o = plan.regs[owner[a]];
      if (last_read[owner[a]] == j && o.slot >= 0 && o.kind != Plan::filled &&
          o.kind != Plan::output &&
          std::find(free_slots.begin(), free_slots.end(), o.slot) == free_slots.end()) {
        free_slots.push_back(o.slot);
      }
    }
  }
  return plan;
}

}  // namespace

void Compiled::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  for (auto& out : outputs) out.set_data(allocator::malloc(out.nbytes()));
  if (outputs[0].size() == 0) return;
  const FusedLayout layout = fused_layout(outputs[0].shape(), inputs);
  const Plan plan = make_plan(program_, layout, inputs, *this);
  const uint32_t n_in = program_.num_inputs;
  const int64_t size = layout.size;
  const int64_t blocks = (size + plan.block - 1) / plan.block;
  std::vector<char*> dst;
  for (auto& out : outputs) dst.push_back(static_cast<char*>(out.raw_data()));
  cpu::parallel_for(blocks, std::max<int64_t>(1, kGrainElements / plan.block), [&](int64_t b0,
                                                                                 int64_t b1) {
    std::unique_ptr<char[]> memory(new char[plan.slots * kBlockBytes + 64]);
    char* base = memory.get() + (64 - reinterpret_cast<std::uintptr_t>(memory.get()) % 64) % 64;
    auto slot = [&](int s) { return base + s * kBlockBytes; };
    std::vector<const void*> ptr(plan.regs.size());
    for (uint32_t k = 0; k < n_in; ++k) {
      if (plan.regs[k].kind != Plan::filled) continue;
      const char* v = static_cast<const char*>(inputs[k].raw_data());
      const size_t w = plan.regs[k].itemsize;
      for (int64_t i = 0; i < plan.block; ++i) std::memcpy(slot(plan.regs[k].slot) + i * w, v, w);
      ptr[k] = slot(plan.regs[k].slot);
    }
    const void* args[3];
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t start = b * plan.block;
      const int64_t n = std::min(plan.block, size - start);
      for (uint32_t k = 0; k < n_in; ++k) {
        const auto& reg = plan.regs[k];
        const char* src = static_cast<const char*>(inputs[k].raw_data());
        if (reg.kind == Plan::in_place) {
          ptr[k] = src + start * reg.itemsize;
        } else if (reg.kind == Plan::gathered) {
          dispatch_bytes(inputs[k].dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            gather(reinterpret_cast<const T*>(src), layout.shape, layout.strides[k], start, n,
                   reinterpret_cast<T*>(slot(reg.slot)));
          });
          ptr[k] = slot(reg.slot);
        }
      }
      for (size_t j = 0; j < program_.steps.size(); ++j) {
        const FusedStep& step = program_.steps[j];
        const auto& reg = plan.regs[n_in + j];
        if (reg.kind == Plan::alias) {
          ptr[n_in + j] = ptr[reg.source];
          continue;
        }
        for (size_t a = 0; a < step.args.size(); ++a) args[a] = ptr[step.args[a]];
        void* o = reg.kind != Plan::output || plan.streamed
                      ? slot(reg.slot)
                      : dst[reg.output] + start * static_cast<int64_t>(reg.itemsize);
        plan.fns[j](args, o, n, step, plan.in_dtypes[j], plan.forms[j]);
        ptr[n_in + j] = o;
      }
      if (!plan.streamed) continue;
      for (const auto& reg : plan.regs) {
        if (reg.kind != Plan::output) continue;
        const auto w = static_cast<int64_t>(reg.itemsize);
        stream_copy(slot(reg.slot), dst[reg.output] + start * w, n * w);
      }
    }
#if defined(__SSE2__)
    if (plan.streamed) _mm_sfence();
#endif
  });
}

}  // namespace tessera
