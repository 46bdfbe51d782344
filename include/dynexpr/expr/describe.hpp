// dynexpr/expr/describe.hpp — a readable form of an expression tree:
// `dx::describe(x * 2.0f + y)` is "add(mul(x, 2), y)". Array leaves are named by order of
// first appearance (x, y, z, w, then a4, a5, ...); the same memory keeps its name.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "dynexpr/eval/rewrite.hpp"
#include "dynexpr/expr/traverse.hpp"

namespace dynexpr {

namespace detail {
/// Short names for the common ops, NumPy's names for the rest.
constexpr std::string_view short_name(std::string_view n) {
  if (n == "subtract") return "sub";
  if (n == "multiply") return "mul";
  if (n == "true_divide") return "div";
  if (n == "negative") return "neg";
  if (n == "absolute") return "abs";
  if (n == "remainder") return "mod";
  if (n == "power") return "pow";
  return n;
}

struct describer {
  std::vector<std::pair<const void*, Shape>> seen;

  std::string leaf_name(const void* p, const Shape& s) {
    static constexpr const char* first[] = {"x", "y", "z", "w"};
    for (std::size_t i = 0; i < seen.size(); ++i)
      if (seen[i].first == p && seen[i].second == s) return i < 4 ? first[i] : "a" + std::to_string(i);
    seen.emplace_back(p, s);
    const std::size_t i = seen.size() - 1;
    return i < 4 ? first[i] : "a" + std::to_string(i);
  }

  template <class E>
  std::string operator()(const E& e) {
    if constexpr (MapNode<E>) {
      using Op = typename E::op_type;
      std::string s;
      if constexpr (Op::name == "astype")
        s = std::string("astype<") + std::string(dtype_name<typename E::value_type>()) + ">";
      else
        s = std::string(short_name(Op::name));
      s += "(";
      bool first = true;
      for_each_operand(e.args_, [&](const auto& a) {
        if (!first) s += ", ";
        first = false;
        s += (*this)(a);
      });
      return s + ")";
    } else if constexpr (ScalarNode<E>) {
      if constexpr (std::is_same_v<typename E::value_type, bool>) return e.value_ ? "True" : "False";
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(e.value_));
      return buf;
    } else if constexpr (requires { e.tensor_; }) {
      return leaf_name(e.tensor_->data(), e.tensor_->shape());
    } else {
      return leaf_name(e.view_.data(), e.view_.shape());
    }
  }
};
}  // namespace detail

/// The tree as written: "add(mul(x, 2), y)".
template <Operand E>
std::string describe(const E& e) {
  return detail::describer{}(as_expr(e));
}

/// The tree as evaluated, after compile-time rewrites: "fma(x, 2, y)".
template <Operand E>
std::string describe_lowered(const E& e) {
  return detail::describer{}(evaluation::lower(as_expr(e)));
}

}  // namespace dynexpr
