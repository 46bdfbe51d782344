// dynexpr/eval/layout.hpp — the iteration layout of one evaluation: the output shape
// with size-1 dimensions dropped and neighbouring dimensions merged wherever every
// operand (and the output) allows it, so most evaluations become one long flat loop.
#pragma once

#include <cstddef>

#include "dynexpr/core/shape.hpp"

namespace dynexpr::evaluation {

/// How the loop walks the output: `nd` dimensions (>= 1) of `extent`, the innermost last.
/// Coalesced dimension k ends at output dimension `last[k]` (-1: a lone size-1 dimension),
/// so an operand's stride along k is its broadcast stride at `last[k]`.
struct layout {
  Shape out_shape;
  int nd = 1;
  index_t extent[max_rank] = {1};
  int last[max_rank] = {-1};
  int group[max_rank] = {0};  // reductions: which group (kept/reduced) each dim belongs to

  index_t inner() const { return extent[nd - 1]; }
  index_t rows() const {
    index_t r = 1;
    for (int k = 0; k + 1 < nd; ++k) r *= extent[k];
    return r;
  }
  /// An operand's coalesced strides from its broadcast strides (rank of out_shape).
  void coalesce(const Strides& bstrides, index_t* out) const {
    for (int k = 0; k < nd; ++k) out[k] = last[k] < 0 ? 0 : bstrides[last[k]];
  }
};

/// Builds the layout for `out_shape` given every operand's broadcast strides. Reductions
/// pass `order` (the dimensions in iteration order) and `groups` (a group id per
/// dimension); dimensions of different groups are never merged.
inline layout make_layout(const Shape& out_shape, const Strides* operands, std::size_t n_operands,
                          const int* order = nullptr, const int* groups = nullptr) {
  layout L;
  L.out_shape = out_shape;
  int dims[max_rank], n = 0;
  for (int t = 0; t < out_shape.size(); ++t) {
    const int i = order ? order[t] : t;
    if (out_shape[i] != 1) dims[n++] = i;
  }
  if (n == 0) return L;  // a single element
  L.nd = 0;
  for (int t = 0; t < n; ++t) {
    const int i = dims[t];
    const int g = groups ? groups[i] : 0;
    bool merge = L.nd > 0 && L.group[L.nd - 1] == g;
    if (merge) {
      const int prev = L.last[L.nd - 1];
      for (std::size_t o = 0; o < n_operands; ++o)
        if (operands[o][prev] != operands[o][i] * out_shape[i]) {
          merge = false;
          break;
        }
    }
    if (merge) {
      L.extent[L.nd - 1] *= out_shape[i];
      L.last[L.nd - 1] = i;
    } else {
      L.extent[L.nd] = out_shape[i];
      L.last[L.nd] = i;
      L.group[L.nd] = g;
      ++L.nd;
    }
  }
  return L;
}

}  // namespace dynexpr::evaluation
