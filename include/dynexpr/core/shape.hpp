// dynexpr/core/shape.hpp — Shape and Strides (rank <= max_rank) and NumPy broadcasting.
#pragma once

#include <algorithm>
#include <array>
#include <initializer_list>
#include <string>

#include "dynexpr/core/config.hpp"
#include "dynexpr/core/error.hpp"

namespace dynexpr {

/// A fixed-capacity list of up to max_rank extents or strides; no allocation.
template <class Tag>
class dims {
 public:
  constexpr dims() = default;
  constexpr dims(std::initializer_list<index_t> v) { assign(v.begin(), v.end()); }
  template <class It>
  constexpr dims(It first, It last) {
    assign(first, last);
  }
  /// A list of `n` copies of `value`.
  static constexpr dims filled(int n, index_t value) {
    dims d;
    d.check_rank(n);
    d.n_ = n;
    for (int i = 0; i < n; ++i) d.v_[i] = value;
    return d;
  }

  constexpr int size() const { return n_; }
  constexpr bool empty() const { return n_ == 0; }
  constexpr index_t& operator[](int i) { return v_[i]; }
  constexpr index_t operator[](int i) const { return v_[i]; }
  constexpr const index_t* begin() const { return v_.data(); }
  constexpr const index_t* end() const { return v_.data() + n_; }
  constexpr index_t* begin() { return v_.data(); }
  constexpr index_t* end() { return v_.data() + n_; }
  constexpr index_t back() const { return v_[n_ - 1]; }

  constexpr void push_back(index_t x) {
    check_rank(n_ + 1);
    v_[n_++] = x;
  }
  constexpr void insert(int pos, index_t x) {
    check_rank(n_ + 1);
    for (int i = n_; i > pos; --i) v_[i] = v_[i - 1];
    v_[pos] = x;
    ++n_;
  }
  constexpr void erase(int pos) {
    for (int i = pos; i + 1 < n_; ++i) v_[i] = v_[i + 1];
    --n_;
  }

  friend constexpr bool operator==(const dims& a, const dims& b) {
    return a.n_ == b.n_ && std::equal(a.begin(), a.end(), b.begin());
  }

  /// "(3, 4)" as NumPy prints a shape; "(5,)" for rank 1; "()" for rank 0.
  std::string str() const {
    std::string s = "(";
    for (int i = 0; i < n_; ++i) {
      if (i) s += ", ";
      s += std::to_string(v_[i]);
    }
    if (n_ == 1) s += ",";
    return s + ")";
  }

 private:
  template <class It>
  constexpr void assign(It first, It last) {
    n_ = 0;
    for (; first != last; ++first) push_back(static_cast<index_t>(*first));
  }
  constexpr void check_rank(int n) const {
    if (n > max_rank)
      throw shape_error("dynexpr: rank " + std::to_string(n) + " exceeds the maximum of " +
                        std::to_string(max_rank) + "; reshape to fewer dimensions");
  }
  std::array<index_t, max_rank> v_{};
  int n_ = 0;
};

struct shape_tag {};
struct strides_tag {};
/// Extents of each dimension, outermost first.
using Shape = dims<shape_tag>;
/// Element (not byte) strides of each dimension; may be zero (broadcast) or negative.
using Strides = dims<strides_tag>;

/// Number of elements of a shape (1 for rank 0).
constexpr index_t shape_size(const Shape& s) {
  index_t n = 1;
  for (index_t e : s) n *= e;
  return n;
}

/// Row-major (C order) element strides of a shape.
constexpr Strides contiguous_strides(const Shape& s) {
  Strides st = Strides::filled(s.size(), 0);
  index_t acc = 1;
  for (int i = s.size() - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= s[i] > 0 ? s[i] : 1;
  }
  return st;
}

/// Whether a layout visits memory in row-major order with no gaps (size-1 dims ignored).
constexpr bool is_contiguous(const Shape& s, const Strides& st) {
  for (index_t e : s)
    if (e == 0) return true;  // no elements: any strides are contiguous, as in NumPy
  index_t expect = 1;
  for (int i = s.size() - 1; i >= 0; --i) {
    if (s[i] == 1) continue;
    if (st[i] != expect) return false;
    expect *= s[i];
  }
  return true;
}

/// NumPy broadcasting of two shapes; throws shape_error naming both on a mismatch.
DYNEXPR_RT_FN Shape broadcast_shapes(const Shape& a, const Shape& b);
/// Strides that read an array of shape `s`/`st` as if it had the broadcast shape `to`
/// (stride 0 along broadcast dimensions). `to` must be a broadcast of `s`.
DYNEXPR_RT_FN Strides broadcast_strides(const Shape& s, const Strides& st, const Shape& to);

/// Throws the shape_error of a View built from `s` and `st` that do not fit (a stride
/// count that is not the rank, a negative extent). Out of line, and in libdynexpr_rt.so for
/// generated units: every unit builds views, and the message building (Shape::str,
/// std::to_string, string concatenation) was compiled again in each (Note [runtime library]).
[[noreturn]] DYNEXPR_RT_FN void throw_bad_view(const Shape& s, const Strides& st);

#if !defined(DYNEXPR_RUNTIME_EXTERN)  // else in libdynexpr_rt.so (generated units)
[[noreturn]] DYNEXPR_RT_FN void throw_bad_view(const Shape& s, const Strides& st) {
  if (s.size() != st.size())
    throw shape_error("dynexpr: view has shape " + s.str() + " but " + std::to_string(st.size()) +
                      " strides; give one per dimension");
  throw shape_error("dynexpr: negative extent in shape " + s.str());
}
DYNEXPR_RT_FN Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const int n = std::max(a.size(), b.size());
  Shape out = Shape::filled(n, 1);
  for (int i = 0; i < n; ++i) {
    const int ia = a.size() - n + i, ib = b.size() - n + i;
    const index_t ea = ia >= 0 ? a[ia] : 1, eb = ib >= 0 ? b[ib] : 1;
    if (ea != eb && ea != 1 && eb != 1)
      throw shape_error("dynexpr: operands could not be broadcast together with shapes " +
                        a.str() + " " + b.str() + "; make the sizes of dimension " +
                        std::to_string(i - n) + " equal or 1");
    out[i] = ea == 1 ? eb : ea;
  }
  return out;
}

DYNEXPR_RT_FN Strides broadcast_strides(const Shape& s, const Strides& st, const Shape& to) {
  Strides out = Strides::filled(to.size(), 0);
  const int off = to.size() - s.size();
  if (off < 0)
    throw shape_error("dynexpr: cannot broadcast shape " + s.str() + " to " + to.str() +
                      " (more dimensions than the target)");
  for (int i = 0; i < s.size(); ++i) {
    if (s[i] == to[off + i]) out[off + i] = s[i] == 1 ? 0 : st[i];
    else if (s[i] == 1) out[off + i] = 0;
    else
      throw shape_error("dynexpr: cannot broadcast shape " + s.str() + " to " + to.str() +
                        "; dimension " + std::to_string(i) + " has size " +
                        std::to_string(s[i]) + ", expected 1 or " + std::to_string(to[off + i]));
  }
  return out;
}

#endif  // !DYNEXPR_RUNTIME_EXTERN

/// Normalises a possibly negative axis against a rank, as NumPy does; throws index_error.
inline int normalize_axis(int axis, int ndim) {
  if (axis < -ndim || axis >= ndim)
    throw index_error("dynexpr: axis " + std::to_string(axis) +
                      " is out of bounds for array of dimension " + std::to_string(ndim));
  return axis < 0 ? axis + ndim : axis;
}

}  // namespace dynexpr
