// einsum, einsum_path and kron, composed from existing ops.
//
// Labels are ints: a letter is its character code, the k-th dimension of the
// broadcast ellipsis is kEllipsis + k (ellipses are aligned on the right, as
// NumPy broadcasts them). Each operand is first reduced on its own (repeated
// labels become diagonals, size-1 dimensions of a label that is longer
// elsewhere are dropped, labels needed nowhere else are summed), then the
// operands are contracted pairwise along the chosen path.
#include "tessera/ops/einsum.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "tessera/ops/binary.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/matmul.h"
#include "tessera/ops/primitives/matmul.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/utils.h"

namespace tessera {

namespace {

constexpr int kEllipsis = 1000;
constexpr int kMaxEllipsis = 1000;  // more ellipsis dimensions than any array has
using Labels = std::vector<int>;

std::string label_str(int l) {
  return l >= kEllipsis ? "..." + std::to_string(l - kEllipsis) : std::string(1, char(l));
}

struct Equation {
  std::vector<Labels> inputs;
  Labels output;
  std::map<int, int64_t> sizes;  // the broadcast size of each label
  std::string text;              // the equation in explicit form
};

// The labels of one term ("ab...c") of an operand with `ndim` dimensions
// (ndim < 0: the output, whose ellipsis has `ell` dimensions).
Labels parse_term(const std::string& term, int ndim, int ell, int operand, bool& has_ellipsis) {
  Labels before, after;
  bool seen = false;
  for (size_t i = 0; i < term.size(); ++i) {
    char c = term[i];
    if (c == '.') {
      if (seen || term.compare(i, 3, "...") != 0) {
        throw_invalid("einsum", "invalid ellipsis in the term '" + term +
                                    "': use \"...\" at most once per term");
      }
      seen = true;
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(c))) {
      (seen ? after : before).push_back(c);
    } else {
      throw_invalid("einsum", std::string("invalid character '") + c + "' in the term '" + term +
                                  "': subscripts are letters and \"...\"");
    }
  }
  has_ellipsis = seen;
  const int letters = static_cast<int>(before.size() + after.size());
  int k = ell;
  if (ndim >= 0) {
    if ((!seen && letters != ndim) || (seen && letters > ndim)) {
      throw_invalid("einsum", "operand " + std::to_string(operand) + " has " +
                                  std::to_string(ndim) + " dimensions but the term '" + term +
                                  "' gives " + std::to_string(letters) + " subscripts");
    }
    k = seen ? ndim - letters : 0;
  }
  Labels out = before;
  for (int j = 0; j < k; ++j) out.push_back(kEllipsis + ell - k + j);
  out.insert(out.end(), after.begin(), after.end());
  return out;
}

Equation parse(std::string subscripts, const std::vector<Shape>& shapes) {
  subscripts.erase(std::remove(subscripts.begin(), subscripts.end(), ' '), subscripts.end());
  if (shapes.empty()) throw_invalid("einsum", "at least one operand is required");
  std::string lhs = subscripts, rhs;
  bool explicit_out = false;
  if (auto arrow = subscripts.find("->"); arrow != std::string::npos) {
    lhs = subscripts.substr(0, arrow);
    rhs = subscripts.substr(arrow + 2);
    explicit_out = true;
    if (rhs.find("->") != std::string::npos) {
      throw_invalid("einsum", "the subscripts '" + subscripts + "' have more than one \"->\"");
    }
  }
  std::vector<std::string> terms;
  std::stringstream ss(lhs);
  for (std::string t; std::getline(ss, t, ',');) terms.push_back(t);
  if (!lhs.empty() && lhs.back() == ',') terms.push_back("");
  if (terms.size() != shapes.size()) {
    throw_invalid("einsum", "the subscripts '" + subscripts + "' name " +
                                std::to_string(terms.size()) + " operands but " +
                                std::to_string(shapes.size()) + " were given");
  }
  // The ellipsis of every operand, broadcast: as many dimensions as the longest.
  int ell = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    bool e;
    Labels l = parse_term(terms[i], static_cast<int>(shapes[i].size()), kMaxEllipsis, int(i), e);
    ell = std::max(ell, static_cast<int>(std::count_if(
                            l.begin(), l.end(), [](int x) { return x >= kEllipsis; })));
  }
  Equation eq;
  bool any_ellipsis = false;
  for (size_t i = 0; i < terms.size(); ++i) {
    bool e;
    Labels l = parse_term(terms[i], static_cast<int>(shapes[i].size()), ell, int(i), e);
    any_ellipsis |= e;
    for (size_t d = 0; d < l.size(); ++d) {
      int64_t n = shapes[i][d];
      auto [it, fresh] = eq.sizes.emplace(l[d], n);
      if (!fresh && it->second != n) {
        if (it->second != 1 && n != 1) {
          throw_invalid("einsum", "subscript '" + label_str(l[d]) + "' has size " +
                                      std::to_string(it->second) + " and " + std::to_string(n) +
                                      ", which cannot be broadcast");
        }
        it->second = std::max(it->second, n);
      }
    }
    eq.inputs.push_back(std::move(l));
  }
  if (explicit_out) {
    bool e;
    eq.output = parse_term(rhs, -1, ell, -1, e);
    if (!e) {
      // Without "..." in the output, the ellipsis dimensions are summed.
      eq.output.erase(std::remove_if(eq.output.begin(), eq.output.end(),
                                     [](int x) { return x >= kEllipsis; }),
                      eq.output.end());
    }
    std::set<int> seen;
    for (int l : eq.output) {
      if (!seen.insert(l).second) {
        throw_invalid("einsum", "subscript '" + label_str(l) + "' appears more than once in the output");
      }
      if (!eq.sizes.count(l)) {
        throw_invalid("einsum", "output subscript '" + label_str(l) + "' is not in any input");
      }
    }
  } else {
    std::map<int, int> count;
    for (auto& l : eq.inputs) {
      for (int x : l) ++count[x];
    }
    for (int k = 0; k < ell && any_ellipsis; ++k) eq.output.push_back(kEllipsis + k);
    for (auto [l, c] : count) {
      if (l < kEllipsis && c == 1) eq.output.push_back(l);
    }
  }
  auto term_text = [](const Labels& l) {
    std::string t;
    bool dots = false;
    for (int x : l) {
      if (x >= kEllipsis) {
        if (!dots) t += "...";
        dots = true;
      } else {
        t += char(x);
      }
    }
    return t;
  };
  for (size_t i = 0; i < eq.inputs.size(); ++i) {
    if (i) eq.text += ',';
    eq.text += term_text(eq.inputs[i]);
  }
  eq.text += "->";
  eq.text += term_text(eq.output);
  return eq;
}

// ---- paths -------------------------------------------------------------------

bool contains(const Labels& l, int x) { return std::find(l.begin(), l.end(), x) != l.end(); }

// The labels of each operand after its own reduction (see the top of the file).
std::vector<Labels> reduced_labels(const Equation& eq, const std::vector<Shape>& shapes) {
  std::vector<Labels> out;
  for (size_t i = 0; i < eq.inputs.size(); ++i) {
    Labels l;
    for (size_t d = 0; d < eq.inputs[i].size(); ++d) {
      int x = eq.inputs[i][d];
      if (contains(l, x)) continue;
      if (shapes[i][d] == 1 && eq.sizes.at(x) != 1) continue;
      l.push_back(x);
    }
    out.push_back(std::move(l));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    Labels kept;
    for (int x : out[i]) {
      bool needed = contains(eq.output, x);
      for (size_t j = 0; j < out.size() && !needed; ++j) needed = j != i && contains(out[j], x);
      if (needed) kept.push_back(x);
    }
    out[i] = std::move(kept);
  }
  return out;
}

double label_product(const std::set<int>& labels, const Equation& eq) {
  double p = 1;
  for (int x : labels) p *= static_cast<double>(eq.sizes.at(x));
  return p;
}

struct Step {
  int i, j;              // positions in the current list (i < j)
  Labels result;         // labels of the contracted operand
  double cost;           // multiply-adds
  double result_size;
};

// The contraction of operands i and j of `ops`: the labels it keeps are those
// of the output or of another operand.
Step plan_step(const std::vector<Labels>& ops, int i, int j, const Equation& eq) {
  std::set<int> all(ops[i].begin(), ops[i].end());
  all.insert(ops[j].begin(), ops[j].end());
  Labels result;
  for (const Labels* src : {&ops[i], &ops[j]}) {
    for (int x : *src) {
      if (contains(result, x)) continue;
      bool needed = contains(eq.output, x);
      for (size_t k = 0; k < ops.size() && !needed; ++k) {
        needed = int(k) != i && int(k) != j && contains(ops[k], x);
      }
      if (needed) result.push_back(x);
    }
  }
  std::set<int> rs(result.begin(), result.end());
  return {i, j, result, label_product(all, eq), label_product(rs, eq)};
}

std::vector<Labels> apply_step(std::vector<Labels> ops, const Step& st) {
  ops.erase(ops.begin() + st.j);
  ops.erase(ops.begin() + st.i);
  ops.push_back(st.result);
  return ops;
}

// Exhaustive search for the cheapest order (few operands).
double optimal(const std::vector<Labels>& ops, const Equation& eq, std::vector<Step>& best) {
  if (ops.size() <= 1) {
    best.clear();
    return 0;
  }
  double best_cost = std::numeric_limits<double>::infinity();
  for (int i = 0; i < int(ops.size()); ++i) {
    for (int j = i + 1; j < int(ops.size()); ++j) {
      Step st = plan_step(ops, i, j, eq);
      if (st.cost >= best_cost) continue;
      std::vector<Step> rest;
      double c = st.cost + optimal(apply_step(ops, st), eq, rest);
      if (c < best_cost) {
        best_cost = c;
        best = {st};
        best.insert(best.end(), rest.begin(), rest.end());
      }
    }
  }
  return best_cost;
}

// The cheapest pair at each step (many operands).
std::vector<Step> greedy(std::vector<Labels> ops, const Equation& eq) {
  std::vector<Step> path;
  while (ops.size() > 1) {
    Step best = plan_step(ops, 0, 1, eq);
    for (int i = 0; i < int(ops.size()); ++i) {
      for (int j = i + 1; j < int(ops.size()); ++j) {
        Step st = plan_step(ops, i, j, eq);
        if (st.cost < best.cost || (st.cost == best.cost && st.result_size < best.result_size)) {
          best = st;
        }
      }
    }
    path.push_back(best);
    ops = apply_step(std::move(ops), best);
  }
  return path;
}

constexpr size_t kOptimalOperands = 6;

std::vector<Step> choose_path(const std::vector<Labels>& ops, const Equation& eq) {
  if (ops.size() <= kOptimalOperands) {
    std::vector<Step> best;
    optimal(ops, eq, best);
    return best;
  }
  return greedy(ops, eq);
}

std::vector<Shape> shapes_of(const std::vector<array>& operands) {
  std::vector<Shape> shapes;
  for (auto& a : operands) shapes.push_back(a.shape());
  return shapes;
}

// ---- execution ----------------------------------------------------------------

struct Operand {
  array x;
  Labels labels;
};

int index_of(const Labels& l, int x) {
  return static_cast<int>(std::find(l.begin(), l.end(), x) - l.begin());
}

// Sums x over the labels for which keep() is false.
Operand sum_out(Operand op, const std::function<bool(int)>& keep, Dtype t, StreamOrDevice s) {
  std::vector<int> axes;
  Labels kept;
  for (int d = 0; d < int(op.labels.size()); ++d) {
    if (keep(op.labels[d])) {
      kept.push_back(op.labels[d]);
    } else {
      axes.push_back(d);
    }
  }
  if (axes.empty()) return op;
  return {astype(sum(op.x, axes, false, s), t, s), kept};
}

// Diagonals for repeated labels, size-1 broadcast dimensions dropped.
Operand prepare(const array& a, Labels labels, const Equation& eq, StreamOrDevice s) {
  array x = a;
  for (bool again = true; again;) {
    again = false;
    for (int p = 0; p < int(labels.size()) && !again; ++p) {
      for (int q = p + 1; q < int(labels.size()) && !again; ++q) {
        if (labels[p] != labels[q]) continue;
        if (x.shape(p) != x.shape(q)) {
          // One of them is a broadcast 1: take the other's elements.
          int one = x.shape(p) == 1 ? p : q;
          x = squeeze(x, one, s);
          labels.erase(labels.begin() + one);
        } else {
          int l = labels[p];
          x = diagonal(x, 0, p, q, s);
          labels.erase(labels.begin() + q);
          labels.erase(labels.begin() + p);
          labels.push_back(l);
        }
        again = true;
      }
    }
  }
  std::vector<int> unit;
  Labels kept;
  for (int d = 0; d < int(labels.size()); ++d) {
    if (x.shape(d) == 1 && eq.sizes.at(labels[d]) != 1) {
      unit.push_back(d);
    } else {
      kept.push_back(labels[d]);
    }
  }
  if (!unit.empty()) x = squeeze(x, unit, s);
  return {x, kept};
}

array permuted(const array& x, const Labels& from, const Labels& to, StreamOrDevice s) {
  std::vector<int> perm;
  for (int l : to) perm.push_back(index_of(from, l));
  return perm == all_axes(static_cast<int>(perm.size())) ? x : transpose(x, perm, s);
}

// a @ b for (..., M, K) and (..., K, N) of dtype t with equal batch shapes.
array product(const array& a, const array& b, Dtype t, StreamOrDevice s) {
  if (is_inexact(t)) return matmul(a, b, s);
  Shape shape = a.shape();
  shape.back() = b.shape(-1);
  return array(std::move(shape), t, std::make_shared<Matmul>(to_stream(s)), {a, b});
}

Operand contract(const Operand& A, const Operand& B, const Labels& result, Dtype t,
                 StreamOrDevice s) {
  auto in_result = [&](int x) { return contains(result, x); };
  Operand a = sum_out(A, [&](int x) { return in_result(x) || contains(B.labels, x); }, t, s);
  Operand b = sum_out(B, [&](int x) { return in_result(x) || contains(A.labels, x); }, t, s);
  Labels batch, a_free, b_free, summed;
  for (int x : a.labels) {
    if (contains(b.labels, x)) {
      (in_result(x) ? batch : summed).push_back(x);
    } else {
      a_free.push_back(x);
    }
  }
  for (int x : b.labels) {
    if (!contains(a.labels, x)) b_free.push_back(x);
  }
  auto size_of = [&](int x) {
    int i = index_of(a.labels, x);
    return i < int(a.labels.size()) ? a.x.shape(i) : b.x.shape(index_of(b.labels, x));
  };
  auto extent = [&](const Labels& l) {
    int64_t n = 1;
    for (int x : l) n *= size_of(x);
    return static_cast<ShapeElem>(n);
  };
  Shape batch_shape;
  for (int x : batch) batch_shape.push_back(size_of(x));
  Labels out_labels = batch;
  out_labels.insert(out_labels.end(), a_free.begin(), a_free.end());
  out_labels.insert(out_labels.end(), b_free.begin(), b_free.end());
  Shape out_shape;
  for (int x : out_labels) out_shape.push_back(size_of(x));

  Labels a_order = batch, b_order = batch;
  a_order.insert(a_order.end(), a_free.begin(), a_free.end());
  a_order.insert(a_order.end(), summed.begin(), summed.end());
  b_order.insert(b_order.end(), summed.begin(), summed.end());
  b_order.insert(b_order.end(), b_free.begin(), b_free.end());
  array xa = permuted(a.x, a.labels, a_order, s);
  array xb = permuted(b.x, b.labels, b_order, s);
  array r(0.f);
  if (summed.empty()) {
    // An outer product over the free labels: a broadcast multiply.
    Shape sa = batch_shape, sb = batch_shape;
    for (int x : a_free) sa.push_back(size_of(x));
    for (size_t k = 0; k < b_free.size(); ++k) sa.push_back(1);
    for (size_t k = 0; k < a_free.size(); ++k) sb.push_back(1);
    for (int x : b_free) sb.push_back(size_of(x));
    r = multiply(reshape(xa, sa, s), reshape(xb, sb, s), s);
  } else {
    Shape sa = batch_shape, sb = batch_shape;
    sa.insert(sa.end(), {extent(a_free), extent(summed)});
    sb.insert(sb.end(), {extent(summed), extent(b_free)});
    r = reshape(product(reshape(xa, sa, s), reshape(xb, sb, s), t, s), out_shape, s);
  }
  return {astype(r, t, s), out_labels};
}

std::string report(const Equation& eq, const std::vector<Labels>& ops,
                   const std::vector<Step>& path) {
  std::set<int> all;
  for (auto& l : eq.inputs) all.insert(l.begin(), l.end());
  double naive = label_product(all, eq) * std::max<size_t>(eq.inputs.size() - 1, 1);
  double opt = 0, largest = 0;
  size_t scaling = 0;
  std::vector<Labels> cur = ops;
  std::ostringstream rows;
  for (auto& st : path) {
    std::set<int> u(cur[st.i].begin(), cur[st.i].end());
    u.insert(cur[st.j].begin(), cur[st.j].end());
    scaling = std::max(scaling, u.size());
    opt += st.cost;
    largest = std::max(largest, st.result_size);
    cur = apply_step(cur, st);
    std::string rest;
    for (size_t k = 0; k < cur.size(); ++k) {
      if (k) rest += ",";
      for (int x : cur[k]) rest += label_str(x);
    }
    rows << "  " << u.size() << "  (" << st.i << ", " << st.j << ")  " << rest << "\n";
  }
  std::ostringstream os;
  os << "  Complete contraction:  " << eq.text << "\n"
     << "         Naive scaling:  " << all.size() << "\n"
     << "     Optimized scaling:  " << scaling << "\n"
     << "      Naive FLOP count:  " << naive << "\n"
     << "  Optimized FLOP count:  " << opt << "\n"
     << "   Theoretical speedup:  " << (opt > 0 ? naive / opt : 1.0) << "\n"
     << "  Largest intermediate:  " << largest << " elements\n"
     << "--------------------------------------------------\n"
     << "scaling  contraction  remaining\n"
     << "--------------------------------------------------\n"
     << rows.str();
  return os.str();
}

}  // namespace

std::pair<std::vector<std::vector<int>>, std::string> einsum_path(
    const std::string& subscripts, const std::vector<array>& operands) {
  auto shapes = shapes_of(operands);
  Equation eq = parse(subscripts, shapes);
  auto ops = reduced_labels(eq, shapes);
  auto path = choose_path(ops, eq);
  std::vector<std::vector<int>> out;
  if (path.empty()) out.push_back({0});
  for (auto& st : path) out.push_back({st.i, st.j});
  return {out, report(eq, ops, path)};
}

array einsum(const std::string& subscripts, const std::vector<array>& operands,
             StreamOrDevice s) {
  auto shapes = shapes_of(operands);
  Equation eq = parse(subscripts, shapes);
  Dtype t = operands[0].dtype();
  for (auto& a : operands) t = promote_types(t, a.dtype());

  std::vector<Operand> ops;
  for (size_t i = 0; i < operands.size(); ++i) {
    ops.push_back(prepare(astype(operands[i], t, s), eq.inputs[i], eq, s));
  }
  // Labels no other operand and not the output needs are summed right away.
  for (size_t i = 0; i < ops.size(); ++i) {
    ops[i] = sum_out(
        ops[i],
        [&](int x) {
          if (contains(eq.output, x)) return true;
          for (size_t j = 0; j < ops.size(); ++j) {
            if (j != i && contains(ops[j].labels, x)) return true;
          }
          return false;
        },
        t, s);
  }
  std::vector<Labels> labels;
  for (auto& op : ops) labels.push_back(op.labels);
  for (auto& st : choose_path(labels, eq)) {
    Operand r = contract(ops[st.i], ops[st.j], st.result, t, s);
    ops.erase(ops.begin() + st.j);
    ops.erase(ops.begin() + st.i);
    ops.push_back(std::move(r));
  }
  Operand last = sum_out(ops[0], [&](int x) { return contains(eq.output, x); }, t, s);
  return permuted(last.x, last.labels, eq.output, s);
}

array kron(const array& a, const array& b, StreamOrDevice s) {
  const int nd = static_cast<int>(std::max(a.ndim(), b.ndim()));
  auto padded = [nd](const array& x) {
    Shape sh(nd - x.ndim(), 1);
    sh.insert(sh.end(), x.shape().begin(), x.shape().end());
    return sh;
  };
  Shape sa = padded(a), sb = padded(b), ia, ib, out;
  for (int d = 0; d < nd; ++d) {
    ia.insert(ia.end(), {sa[d], 1});
    ib.insert(ib.end(), {1, sb[d]});
    out.push_back(sa[d] * sb[d]);
  }
  return reshape(multiply(reshape(a, ia, s), reshape(b, ib, s), s), out, s);
}

}  // namespace tessera
