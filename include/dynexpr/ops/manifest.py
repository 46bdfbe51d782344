"""dynexpr's op and dtype manifest: the one place an op or a dtype is listed.

include/dynexpr/ops/generate.py turns it into every list the C++ library, the kernel ABI,
the native extension and the tests need (ops/op_table.hpp, ops/registry.hpp,
ops/named.hpp, the dtype tables); the Python package reads it directly
(dynexpr/manifest.py). Adding an op is one `op(...)` entry here plus its tests, then
`python include/dynexpr/ops/generate.py` (a test fails while the generated files are stale).

An op entry (`op(...)`) holds:
  id, name     the C++ struct (`add_op`) and NumPy's name of the op ("add")
  arity, kind  operand count; "elementwise", "comparison", "predicate", "logical",
               "bitwise", "float_unary" (float functions of one argument, measured for
               accuracy), "float_binary", "internal" (fma/fms/fnma: rewrites, never
               written by users), "select" (where), "cast" (astype)
  rule         the dtype rule (ops/rules.hpp): which type the body computes in, which
               dtype the result has
  cost, acc    rough cycles per element (threading threshold); max ulp error of the SIMD
               body (f32, f64) over the sampled range (lo, hi); None: exact
  check        C++ statements (static_asserts naming the op) rejecting dtype combinations
  scalar       the scalar body, written once: C++ statements over the parameters `params`
               of compute type T, compiled for the host and (DYNEXPR_HOST_DEVICE) for a
               CUDA device
  simd         the Highway body over tag `d` and vectors of T (masks for bool compute
               types), or None: the scalar body runs lane by lane (detail::by_lane)
  python       how Python reaches the op: "ufunc" (np.<name> is its ufunc), "function"
               (a NumPy function with a handler of its own: clip, where), None (C++ only),
               or {"numpy": "<expression over params>"}: a NumPy reference from which
               dynexpr.ops.<name> is made, usable in plain and captured code alike
  aliases      more C++ names of the named function (dx::divide for true_divide)
  operator     the C++ binary operator of the op, if any; py_operator: Python's, where it
               differs (// and **)
  on_bools     the op NumPy computes for two bool operands, where dynexpr's C++ op rejects
               them (add of bools is logical_or); Python's codegen writes that op instead
  fp           the floating-point errors NumPy's loop of the op can report ("divide",
               "over", "under", "invalid"; dynexpr/fperr.py names the op in its warnings)
  reference    tests: the exact value in long double (over `v`, or `a, b`), and `c_reference`
               the C library's answer in T where it is not the scalar body

A dtype entry: NumPy name, C++ element type, ABI code (kernels/abi.h), size in bytes and
NumPy kind character, in promotion order.
"""

from __future__ import annotations

DTYPES = (
    # name, C++ type, code, size, kind
    ("bool", "bool", 0, 1, "b"),
    ("uint8", "std::uint8_t", 1, 1, "u"),
    ("int32", "std::int32_t", 2, 4, "i"),
    ("int64", "std::int64_t", 3, 8, "i"),
    ("float32", "float", 4, 4, "f"),
    ("float64", "double", 5, 8, "f"),
)

# Reductions have evaluators of their own (eval/reductions.hpp); listed for Python's tables.
REDUCTIONS = ("sum", "prod", "min", "max", "mean", "any", "all", "var", "std", "argmin", "argmax")

OPS: list[dict] = []
_PARAMS = {1: ("a",), 2: ("a", "b"), 3: ("a", "b", "c")}
ARITH_FP = ("over", "under", "invalid")
DIV_FP = ("divide", "over", "under", "invalid")


def op(id, name, arity, kind, rule, *, scalar=None, simd=None, cost=1, acc=None, check="",
       params=None, result="T", constexpr=True, python="ufunc", aliases=(), operator=None,
       py_operator=None, on_bools=None, fp=(), reference=None, c_reference=None, doc="",
       raw=None):
    """Adds one op entry (see the module docstring) and returns it."""
    entry = dict(id=id, name=name, arity=arity, kind=kind, rule=rule, scalar=scalar, simd=simd,
                 cost=cost, acc=acc, check=check, params=params or _PARAMS[arity],
                 result=result, constexpr=constexpr, python=python, aliases=tuple(aliases),
                 operator=operator, py_operator=py_operator or operator, on_bools=on_bools,
                 fp=tuple(fp),
                 reference=reference, c_reference=c_reference, doc=doc,
                 raw=raw)
    OPS.append(entry)
    return entry


def _not_two_bools(name, alt):
    return f'DYNEXPR_NOT_TWO_BOOLS("{name}", "{alt}");'


def _wrapping(sym):
    return f"return detail::wrapping([](auto x, auto y) {{ return x {sym} y; }}, a, b);"


# ----------------------------------------------------------------------- arithmetic
op("add_op", "add", 2, "elementwise", "arith_rule", fp=ARITH_FP, operator="+",
   on_bools="logical_or",
   check=_not_two_bools("add", "use dx::logical_or"), scalar=_wrapping("+"),
   simd="return hn::Add(a, b);")
op("sub_op", "subtract", 2, "elementwise", "arith_rule", fp=ARITH_FP, operator="-",
   check=_not_two_bools("subtract", "use dx::logical_xor"), scalar=_wrapping("-"),
   simd="return hn::Sub(a, b);")
op("mul_op", "multiply", 2, "elementwise", "arith_rule", fp=ARITH_FP, operator="*",
   on_bools="logical_and",
   check=_not_two_bools("multiply", "use dx::logical_and"), scalar=_wrapping("*"),
   simd="""// hn::Mul is a generic wrapper of operator*: test the operator (no u8, no i64 on AVX2).
if constexpr (requires { a * b; }) return hn::Mul(a, b);
else return detail::by_lane<mul_op>(d, a, b);""")
op("fma_op", "fma", 3, "internal", "arith_rule", fp=ARITH_FP, constexpr=False, python=None,
   doc="a * b + c with one rounding; produced by the compile-time contraction of\n"
       "add(mul(a, b), c) (eval/rewrite.hpp), never written by users.",
   scalar="return std::fma(a, b, c);", simd="return hn::MulAdd(a, b, c);")
op("fms_op", "fms", 3, "internal", "arith_rule", constexpr=False, python=None,
   doc="a * b - c and c - a * b with one rounding (from sub(mul(a, b), c) and sub(c, mul(a, b))).",
   scalar="return std::fma(a, b, -c);", simd="return hn::MulSub(a, b, c);")
op("fnma_op", "fnma", 3, "internal", "arith_rule", constexpr=False, python=None,
   scalar="return std::fma(-a, b, c);", simd="return hn::NegMulAdd(a, b, c);")
op("div_op", "true_divide", 2, "elementwise", "float_binary_rule", fp=DIV_FP, cost=4,
   aliases=("divide",),
   operator="/", scalar="return a / b;", simd="return hn::Div(a, b);",
   reference="a / b", c_reference="a / b")
op("floor_divide_op", "floor_divide", 2, "elementwise", "arith_rule", fp=DIV_FP, cost=20,
   constexpr=False,
   py_operator="//",
   check=_not_two_bools("floor_divide", "cast to an integer type first"),
   doc="NumPy's npy_floor_divide: integers round toward -inf and give 0 for a zero divisor;\n"
       "floats follow divmod so that a == b * (a // b) + a % b as closely as rounding allows.",
   scalar="""if constexpr (is_float_v<T>) {
  // NaN first: the ordered compares below would raise "invalid" on it (NumPy: quiet).
  if (a != a || b != b) return a + b;
  if (b == 0) return a / b;
  T mod = std::fmod(a, b);
  T div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= T(1);
  if (div == 0) return std::copysign(T(0), a / b);
  T fl = std::floor(div);
  if (div - fl > T(0.5)) fl += T(1);
  return fl;
} else {
  if (b == 0) return detail::divide_by_zero<T>();
  if constexpr (std::is_signed_v<T>) {
    if (a == std::numeric_limits<T>::min() && b == T(-1)) return detail::overflowed(a);
    T q = static_cast<T>(a / b);
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  } else {
    return static_cast<T>(a / b);
  }
}""",
   simd="""if constexpr (std::is_integral_v<hn::TFromD<D>>) return detail::int_divmod<floor_divide_op, false>(d, a, b);
else return detail::by_lane<floor_divide_op>(d, a, b);""")
op("mod_op", "remainder", 2, "elementwise", "arith_rule", fp=DIV_FP, cost=20, constexpr=False,
   aliases=("mod",), operator="%",
   check=_not_two_bools("remainder", "cast to an integer type first"),
   doc="NumPy's npy_remainder: the result has the sign of the divisor; 0 for a zero divisor\n"
       "with integers, NaN with floats.",
   scalar="""if constexpr (is_float_v<T>) {
  if (a != a || b != b) return a + b;  // quiet, as in floor_divide_op
  if (b == 0) return std::fmod(a, b);
  T mod = std::fmod(a, b);
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(T(0), b);
  }
  return mod;
} else {
  if (b == 0) return detail::divide_by_zero<T>();
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return T(0);
    T r = static_cast<T>(a % b);
    if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
    return r;
  } else {
    return static_cast<T>(a % b);
  }
}""",
   simd="""if constexpr (std::is_integral_v<hn::TFromD<D>>) return detail::int_divmod<mod_op, true>(d, a, b);
else return detail::by_lane<mod_op>(d, a, b);""")
op("minimum_op", "minimum", 2, "elementwise", "arith_rule", on_bools="logical_and",
   check=_not_two_bools("minimum", "use dx::logical_and"),
   scalar="return detail::scalar_min(a, b);",
   simd="""if constexpr (requires { hn::Min(a, b); }) return detail::nan_min(d, a, b);
else return detail::by_lane<minimum_op>(d, a, b);""")
op("maximum_op", "maximum", 2, "elementwise", "arith_rule", on_bools="logical_or",
   check=_not_two_bools("maximum", "use dx::logical_or"),
   scalar="return detail::scalar_max(a, b);",
   simd="""if constexpr (requires { hn::Max(a, b); }) return detail::nan_max(d, a, b);
else return detail::by_lane<maximum_op>(d, a, b);""")
op("clip_op", "clip", 3, "elementwise", "arith_rule", cost=2, python="function",
   params=("x", "lo", "hi"), check=_not_two_bools("clip", "cast to an integer type first"),
   doc="clip(x, lo, hi) = minimum(maximum(x, lo), hi), as NumPy 2 defines it (NaN propagates).",
   scalar="return detail::scalar_min(detail::scalar_max(x, lo), hi);",
   simd="return minimum_op::simd(d, maximum_op::simd(d, x, lo), hi);")
op("neg_op", "negative", 1, "elementwise", "same_rule", aliases=("neg",),
   check='DYNEXPR_OP_CHECK("negative", !is_bool_v<A>, "not defined for bool (as in NumPy); '
         'use dx::logical_not");',
   scalar="""if constexpr (is_float_v<T>) return -a;  // -(+0.0) is -0.0; 0 - x would give +0.0
else return detail::wrapping([](auto, auto y) { return decltype(y)(0) - y; }, T(0), a);""",
   simd="""if constexpr (is_float_v<hn::TFromD<D>>) return hn::Neg(a);
else return hn::Sub(hn::Zero(d), a);""")
op("abs_op", "absolute", 1, "elementwise", "same_rule", aliases=("abs",),
   scalar="""if constexpr (std::is_unsigned_v<T> || is_bool_v<T>) return a;
else if constexpr (is_float_v<T>) return std::fabs(a);
else return a < 0 ? neg_op::scalar(a) : a;""",
   simd="""if constexpr (std::is_unsigned_v<hn::TFromD<D>> || std::is_same_v<V, hn::Mask<D>>)
  return a;
else if constexpr (requires { hn::Abs(a); }) return hn::Abs(a);
else return detail::by_lane<abs_op>(d, a);""")
_NO_BOOL_INT8 = '"bool gives int8 in NumPy, which dynexpr does not have; cast first"'
op("square_op", "square", 1, "elementwise", "same_rule", fp=ARITH_FP,
   check=f'DYNEXPR_OP_CHECK("square", !is_bool_v<A>, {_NO_BOOL_INT8});',
   scalar="return mul_op::scalar(a, a);", simd="return mul_op::simd(d, a, a);")
op("reciprocal_op", "reciprocal", 1, "elementwise", "same_rule", fp=DIV_FP, cost=4,
   check=f'DYNEXPR_OP_CHECK("reciprocal", !is_bool_v<A>, {_NO_BOOL_INT8});',
   scalar="""if constexpr (is_float_v<T>) return T(1) / a;
else return a == 0 ? T(0) : static_cast<T>(T(1) / a);  // integer 1/x truncates""",
   simd="""if constexpr (is_float_v<hn::TFromD<D>>) return hn::Div(hn::Set(d, 1), a);
else return detail::by_lane<reciprocal_op>(d, a);""")
op("sign_op", "sign", 1, "elementwise", "same_rule", cost=2,
   check='DYNEXPR_OP_CHECK("sign", !is_bool_v<A>, '
         '"not defined for bool (as in NumPy); cast first");',
   scalar="""if constexpr (is_float_v<T>)
  if (a != a) return a;
return a > T(0) ? T(1) : (a < T(0) ? T(-1) : T(0));""",
   simd="""using T = hn::TFromD<D>;
if constexpr (std::is_unsigned_v<T>) {
  return hn::IfThenElseZero(simd::nonzero(d, a), hn::Set(d, 1));
} else if constexpr (requires { a > a; }) {
  const V pos = hn::IfThenElseZero(hn::Gt(a, hn::Zero(d)), hn::Set(d, T(1)));
  const V r = hn::IfThenElse(hn::Lt(a, hn::Zero(d)), hn::Set(d, T(-1)), pos);
  if constexpr (is_float_v<T>) return hn::IfThenElse(hn::IsNaN(a), a, r);
  else return r;
} else {
  return detail::by_lane<sign_op>(d, a);
}""")
op("pow_op", "power", 2, "elementwise", "arith_rule", fp=DIV_FP, cost=40, acc=(1, 1, 0.01, 10),
   constexpr=False, aliases=("pow",), py_operator="**",
   reference="std::pow(a, b)", c_reference="std::pow(a, b)",
   check=_not_two_bools("power", "cast to an integer type first"),
   doc="x ** y. Integer powers follow NumPy: exact with wrap-around; a negative exponent\n"
       "raises (NumPy's ValueError) unless the base is 1 or -1.",
   scalar="""if constexpr (is_float_v<T>) {
  return std::pow(a, b);
} else {
  if (b < 0) {
    // NumPy 2 raises for every negative exponent, 1 ** -1 and (-1) ** -1 included.
    throw value_error("dynexpr::power: integers to negative integer powers are not allowed; "
                      "use a float base, e.g. dx::cast<double>(x)");
  }
  using U = std::make_unsigned_t<T>;
  U base = static_cast<U>(a), r = 1;
  for (auto e = static_cast<std::make_unsigned_t<T>>(b); e; e >>= 1) {
    if (e & 1) r = static_cast<U>(r * base);
    base = static_cast<U>(base * base);
  }
  return static_cast<T>(r);
}""",
   simd="""using T = hn::TFromD<D>;
if constexpr (is_float_v<T>) {
  // simd::Pow selects its special cases (x <= 0, NaN, infinities) after computing
  // every case on every lane, raising flags NumPy does not (and missing the "invalid"
  // of a negative base with a non-integral exponent): those lanes take std::pow.
  const auto ok = hn::And(hn::And(hn::Gt(a, hn::Zero(d)), hn::IsFinite(a)), hn::IsFinite(b));
  return detail::guarded2(
      d, a, b, ok, [&](V x, V y) { return simd::Pow(d, x, y); },
      [](T x, T y) { return std::pow(x, y); });
} else {
  return detail::by_lane<pow_op>(d, a, b);
}""")

# --------------------------------------------------------------- rounding (exact)
for _name, _std, _hwy in (("floor", "floor", "Floor"), ("ceil", "ceil", "Ceil"),
                          ("trunc", "trunc", "Trunc")):
    op(f"{_name}_op", _name, 1, "elementwise", "same_rule", constexpr=False,
       scalar=f"""if constexpr (is_float_v<T>) return std::{_std}(a);
else return a;""",
       simd=f"""if constexpr (is_float_v<hn::TFromD<D>> && !std::is_same_v<V, hn::Mask<D>>)
  return hn::{_hwy}(a);
else
  return a; /* integers and bools (masks) are already whole */""")

_FLOAT16 = ('"bool/uint8 input gives float16 in NumPy, which dynexpr does not have; '
            'cast first, e.g. dx::cast<float>(x)"')
op("rint_op", "rint", 1, "float_unary", "float_unary_rule", constexpr=False, params=("x",),
   doc="Round half to even; integers give float64 as in NumPy.",
   check='DYNEXPR_OP_CHECK("rint", !is_narrow_v<A>, "bool/uint8 input gives float16 in NumPy, '
         'which dynexpr does not have; cast first: dx::rint(dx::cast<float>(x))");',
   scalar="return std::nearbyint(x);", simd="return hn::Round(x);",
   reference="std::nearbyint(v)", acc=None)

# -------------------------------------------------------------------- comparisons
# Highway defines < and <= generically as reversed > and >=, which integer vectors lack
# on AVX2 for >=: each op tests the operator that really exists and otherwise compares
# lane by lane.
# The ordered ones compare quietly: no "invalid" flag for a NaN (Note [quiet comparisons]
# in scalar_support.hpp).
for _id, _name, _sym, _call, _test, _scalar in (
        ("equal_op", "equal", "==", "hn::Eq(a, b)", "a == b", "a == b"),
        ("not_equal_op", "not_equal", "!=", "simd::not_equal(d, a, b)", "a == b", "a != b"),
        ("less_op", "less", "<", "hn::Lt(a, b)", "b > a", "detail::quiet_lt(a, b)"),
        ("less_equal_op", "less_equal", "<=", "hn::Le(a, b)", "b >= a", "detail::quiet_le(a, b)"),
        ("greater_op", "greater", ">", "hn::Gt(a, b)", "a > b", "detail::quiet_lt(b, a)"),
        ("greater_equal_op", "greater_equal", ">=", "hn::Ge(a, b)", "a >= b",
         "detail::quiet_le(b, a)")):
    op(_id, _name, 2, "comparison", "compare_rule", result="bool", operator=_sym,
       scalar=f"return {_scalar};",
       simd=f"""if constexpr (requires {{ {_test}; }}) return {_call};
else return detail::by_lane_mask<{_id}>(d, a, b);""")

# ----------------------------------------------------------------- float predicates
for _name, _std, _hwy, _int in (("isnan", "isnan", "IsNaN", "false"),
                                ("isinf", "isinf", "IsInf", "false"),
                                ("isfinite", "isfinite", "IsFinite", "true")):
    op(f"{_name}_op", _name, 1, "predicate", "predicate_rule", result="bool",
       scalar=f"""if constexpr (is_float_v<T>) return std::{_std}(a);
else return {_int};""",
       simd=f"""if constexpr (is_float_v<hn::TFromD<D>>) return hn::{_hwy}(a);
else return hn::FirstN(d, ({_int}) ? hn::Lanes(d) : 0);""")

# ---------------------------------------------------------- logical (masks in/out)
for _name, _arity, _scalar, _hwy in (("logical_and", 2, "a && b", "hn::And(a, b)"),
                                     ("logical_or", 2, "a || b", "hn::Or(a, b)"),
                                     ("logical_xor", 2, "a != b", "hn::Xor(a, b)"),
                                     ("logical_not", 1, "!a", "hn::Not(a)")):
    op(f"{_name}_op", _name, _arity, "logical", "logical_rule", result="bool",
       scalar=f"return {_scalar};", simd=f"return {_hwy};")

# ------------------------------------------------------------------------- bitwise
# For two bools the compute type is bool and the bodies get masks.
_NO_FLOAT = '"not defined for float operands (as in NumPy); cast to an integer type"'
for _name, _sym, _hwy in (("bitwise_and", "&", "And"), ("bitwise_or", "|", "Or"),
                          ("bitwise_xor", "^", "Xor")):
    op(f"{_name}_op", _name, 2, "bitwise", "bitwise_rule", operator=_sym,
       check=f'DYNEXPR_OP_CHECK("{_name}", (!is_float_v<A> && ...), {_NO_FLOAT});',
       scalar=f"return static_cast<T>(a {_sym} b);", simd=f"return hn::{_hwy}(a, b);")
op("invert_op", "invert", 1, "bitwise", "bitwise_rule", aliases=("bitwise_not",),
   check=f'DYNEXPR_OP_CHECK("invert", !is_float_v<A>, {_NO_FLOAT});',
   scalar="""if constexpr (is_bool_v<T>) return !a;
else return static_cast<T>(~a);""", simd="return hn::Not(a);")
# Shifts by a count outside [0, bits) give 0 (or -1 for a negative value shifted right),
# as NumPy defines them; C++ leaves those undefined, so they are checked here.
for _name, _sym, _out in (("left_shift", "<<", "return T(0);"),
                          ("right_shift", ">>", "return a < 0 ? T(-1) : T(0);")):
    _value = ("static_cast<T>(static_cast<U>(a) << b)" if _sym == "<<"
              else "static_cast<T>(a >> b)")
    op(f"{_name}_op", _name, 2, "bitwise", "bitwise_rule", cost=2, operator=_sym,
       check=f'DYNEXPR_OP_CHECK("{_name}", (is_int_v<A> && ...), '
             '"defined for integer operands only; cast first");',
       scalar=f"""using U = std::make_unsigned_t<T>;
constexpr T bits = static_cast<T>(sizeof(T) * 8);
(void)sizeof(U);
if (b < 0 || b >= bits) {_out}
return {_value};""")


# ----------------------------------------------------------- float functions (guarded)
# One float function of x: the C library reference `std` is the scalar body; the Highway
# body `body` (over `d`, `x`) runs where `ok` (over `d`, `x`, T) holds for every lane, and
# the C library answers the other lanes (Note [guarded math], ops/op_support.hpp).
def float_unary(name, std, cost, acc, ok, body, *, reference=None, python="ufunc", **kw):
    return op(f"{name}_op", name, 1, "float_unary", "float_unary_rule", cost=cost, acc=acc,
              params=("x",), constexpr=False, python=python,
              check=f'DYNEXPR_OP_CHECK("{name}", !is_narrow_v<A>,\n                 {_FLOAT16});',
              scalar=f"return {std};",
              simd=f"""using T = hn::TFromD<D>;
(void)sizeof(T);
return detail::guarded(d, x, {ok},
                       [&](V x) {{ return {body}; }},
                       [](T x) {{ return {std}; }});""",
              reference=reference or std.replace("(x)", "(v)"), **kw)


ALL = "hn::Eq(x, x)"  # every non-NaN lane
FINITE = "detail::within(d, x, -detail::max_finite<T>, detail::max_finite<T>)"
EXP_RANGE = "detail::within(d, x, sizeof(T) == 4 ? -87.0 : -708.0, sizeof(T) == 4 ? 88.7 : 709.0)"
# where simd::ExpInRange is valid (Note [exp in range] in simd/math.hpp)
EXP_IN_RANGE = "detail::within(d, x, sizeof(T) == 4 ? -86.9 : -707.5, sizeof(T) == 4 ? 88.3 : 709.0)"
POSITIVE = "detail::above_within(d, x, 0, detail::max_finite<T>)"
TRIG = "detail::within(d, x, -39000, 39000)"
# Highway's asinh/acosh square x: beyond SQUARE_SAFE that overflows (a flag NumPy does not
# raise), so larger arguments take the C library's answer.
SQUARE_SAFE = "(sizeof(T) == 4 ? 1e18 : 1e150)"


def keep_zero(body):
    return f"detail::keep_zero(d, x, {body})"


float_unary("sqrt", "std::sqrt(x)", 4, (0, 0, 0, 1e6), ALL, "hn::Sqrt(x)",
            fp=("invalid",))
float_unary("exp", "std::exp(x)", 12, (1, 1, -80, 80), EXP_IN_RANGE, "simd::ExpInRange(d, x)",
            fp=("over", "under"))
float_unary("expm1", "std::expm1(x)", 14, (4, 4, -80, 80), EXP_RANGE, keep_zero("hn::Expm1(d, x)"),
            fp=("over", "under"))
float_unary("exp2", "std::exp2(x)", 14, (1, 1, -120, 120), FINITE, "simd::Exp2(d, x)",
            fp=("over", "under"))
float_unary("log", "std::log(x)", 12, (4, 4, 1e-30, 1e30), POSITIVE, "hn::Log(d, x)",
            fp=("divide", "invalid"))
float_unary("log1p", "std::log1p(x)", 14, (2, 2, -0.99, 1e30),
            "detail::above_within(d, x, -1, detail::max_finite<T>)", keep_zero("hn::Log1p(d, x)"),
            fp=("divide", "invalid"))
float_unary("log2", "std::log2(x)", 12, (2, 2, 1e-30, 1e30), POSITIVE, "hn::Log2(d, x)",
            fp=("divide", "invalid"))
float_unary("log10", "std::log10(x)", 12, (2, 2, 1e-30, 1e30), POSITIVE, "hn::Log10(d, x)",
            fp=("divide", "invalid"))
float_unary("sin", "std::sin(x)", 16, (3, 3, -1000, 1000), TRIG, keep_zero("hn::Sin(d, x)"),
            fp=("invalid",))
float_unary("cos", "std::cos(x)", 16, (3, 3, -1000, 1000), TRIG, "hn::Cos(d, x)",
            fp=("invalid",))
float_unary("tan", "std::tan(x)", 30, (1, 1, -1.5, 1.5), TRIG, keep_zero("simd::Tan(d, x)"),
            fp=("invalid",))
float_unary("tanh", "std::tanh(x)", 16, (4, 4, -20, 20), FINITE, keep_zero("simd::Tanh(d, x)"))
float_unary("sinh", "std::sinh(x)", 16, (4, 4, -80, 80), EXP_RANGE, keep_zero("hn::Sinh(d, x)"),
            fp=("over", "under"))
float_unary("cosh", "std::cosh(x)", 16, (1.5, 1.5, -80, 80), FINITE, "simd::Cosh(d, x)",
            fp=("over", "under"))
float_unary("arcsin", "std::asin(x)", 16, (3, 3, -1, 1), "detail::within(d, x, -1, 1)",
            keep_zero("hn::Asin(d, x)"),
            fp=("invalid",))
float_unary("arccos", "std::acos(x)", 16, (2, 2, -1, 1), "detail::within(d, x, -1, 1)",
            "hn::Acos(d, x)",
            fp=("invalid",))
float_unary("arctan", "std::atan(x)", 16, (3, 3, -1e4, 1e4), FINITE, keep_zero("hn::Atan(d, x)"))
float_unary("arcsinh", "std::asinh(x)", 16, (3, 3, -1e4, 1e4),
            f"detail::within(d, x, -{SQUARE_SAFE}, {SQUARE_SAFE})", keep_zero("hn::Asinh(d, x)"))
float_unary("arccosh", "std::acosh(x)", 16, (3, 3, 1, 1e4),
            f"detail::within(d, x, 1, {SQUARE_SAFE})", "hn::Acosh(d, x)",
            fp=("invalid",))
float_unary("arctanh", "std::atanh(x)", 16, (3, 3, -0.99, 0.99),
            "hn::And(hn::Gt(x, hn::Set(d, T(-1))), hn::Lt(x, hn::Set(d, T(1))))",
            keep_zero("hn::Atanh(d, x)"),
            fp=("divide", "invalid"))
# No NumPy ufunc: C++ only (a NumPy reference could make them dynexpr.ops functions).
float_unary("sigmoid",
            "(x >= T(0) ? T(1) / (T(1) + std::exp(-x)) : std::exp(x) / (T(1) + std::exp(x)))",
            14, (1, 1, -80, 80), ALL, "simd::Sigmoid(d, x)", python=None,
            reference="1 / (1 + std::exp(-v))",
            c_reference="static_cast<T>(1 / (1 + std::exp(-static_cast<long double>(x))))")
float_unary("erf", "std::erf(x)", 20, (1.5, 1.5, -6, 6), ALL, keep_zero("simd::Erf(d, x)"),
            python=None,
            fp=("under",))


# Two-argument float functions: both bodies compute their special cases (NaN, infinities,
# atan2(0, 0)) on every lane and select afterwards, raising "invalid" where NumPy raises
# nothing: those lanes take the C library's answer (Note [guarded math]).
def float_binary(name, std, cost, acc, ok, body, fp=()):
    return op(f"{name}_op", name, 2, "float_binary", "float_binary_rule", cost=cost, acc=acc,
              constexpr=False, fp=fp,
              check=f'DYNEXPR_OP_CHECK("{name}", !is_narrow_v<promote_all_t<A...>>, '
                    '"bool/uint8 inputs give float16 in NumPy, which dynexpr does not have; '
                    'cast first, e.g. dx::cast<float>(x)");',
              scalar=f"return {std}(a, b);",
              simd=f"""using T = hn::TFromD<D>;
return detail::guarded2(d, a, b, {ok}, [&](V a, V b) {{ return {body}(d, a, b); }},
                        [](T a, T b) {{ return {std}(a, b); }});""",
              reference=f"{std}(a, b)", c_reference=f"{std}(a, b)")


float_binary("arctan2", "std::atan2", 30, (2, 2, -100, 100),
             "hn::And(hn::And(hn::IsFinite(a), hn::IsFinite(b)), "
             "hn::Not(hn::And(hn::Eq(a, hn::Zero(d)), hn::Eq(b, hn::Zero(d)))))", "simd::Atan2",
             fp=("under",))
float_binary("hypot", "std::hypot", 8, (1, 1, -1e10, 1e10),
             "hn::And(hn::IsFinite(a), hn::IsFinite(b))", "simd::Hypot",
             fp=("over", "under"))

# --------------------------------------------------------------- where and cast
# Both have evaluators of their own (eval/evaluator.hpp): no scalar or SIMD body here.
op("where_op", "where", 3, "select", None, python="function",
   doc="where(cond, a, b): cond is read as truth values, a and b promote.",
   raw="""struct where_op {
  static constexpr std::string_view name = "where";
  static constexpr int arity = 3, cost = 1;
  static constexpr accuracy acc{};
  template <class C, class A, class B>
  using result = promote_t<A, B>;
  template <class... A> static constexpr void check() {}
};""")
op("cast_op", "astype", 1, "cast", None, fp=ARITH_FP, python=None,
   doc="astype(To): NumPy's unsafe cast (floats truncate into integers, integers wrap,\n"
       "anything non-zero is true).",
   raw="""template <Element To>
struct cast_op {
  static constexpr std::string_view name = "astype";
  static constexpr int arity = 1, cost = 1;
  static constexpr accuracy acc{};
  template <class A>
  using result = To;
  template <class A> static constexpr void check() {}
};""")
