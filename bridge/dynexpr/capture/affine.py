"""Constants affine in the loop variable (Note [loop-derived scalars]), for reroll.py.

Note [loop-derived scalars]
`t = i * dt` or `t0 + i * dt` used in a loop body's array work (`u += dt * t * f`) puts a
constant in each iteration's graph whose value moves with i: the iterations are not the
same computation, and the loop stayed unrolled. When a constant position's values over
the iterations reroll compares are mul*i + add (ints exactly; floats to within a few
ulps, as Python's own `t0 + i*dt` rounds), the body computes it from its input[0], i:
astype(i) * mul (+ add), cast to the constant's dtype as NumPy would convert it. Every
translated iteration is checked against the formula; a loop whose later iterations were
not translated (truncate.py) reaches here only through a LoopIndexVar, which is affine
by construction (operators._loop_index_affine). A scalar that is not affine in i (`i**2`,
`np.sin(w * t)` folded by Python) keeps the loop unrolled, as before.
"""

from __future__ import annotations

from .. import ir

ULPS = 4  # a float fit may differ from Python's rounding of `t0 + i*dt` by this much


def fit(values: list, xs: list[int], dtype: str) -> tuple | None:
    """(mul, add) with values[m] == mul*xs[m] + add, or None. Ints (int dtypes) exactly;
    floats within ULPS ulps of the largest value."""
    if any(isinstance(c, bool) or not isinstance(c, (int, float)) for c in values):
        return None
    if dtype in ("int32", "int64", "uint8"):
        d = xs[1] - xs[0]
        if (values[1] - values[0]) % d:
            return None
        mul = (values[1] - values[0]) // d
        add = values[0] - mul * xs[0]
        return (mul, add) if all(c == mul * x + add for c, x in zip(values, xs)) else None
    if dtype not in ("float32", "float64"):
        return None
    vs = [float(c) for c in values]
    mul = (vs[-1] - vs[0]) / (xs[-1] - xs[0])
    add = vs[0] - mul * xs[0]
    if add != 0.0 and xs[0] != 0 and abs(vs[0] - mul * xs[0]) <= 1e-15 * abs(vs[0]):
        add = 0.0
    tol = ULPS * 2.0 ** -52 * max(abs(v) for v in vs)
    if all(abs(v - (mul * x + add)) <= tol for v, x in zip(vs, xs)):
        return mul, add
    return None


def body_value(body: ir.Graph, i: ir.Value, v: ir.Value, mul, add) -> ir.Value:
    """The body's nodes computing const v's value mul*i + add from the loop variable i."""
    def node(op, args, dtype, **attrs):
        return body.add(ir.Value(op, tuple(args), dtype, (), ir.make_attrs(**attrs)))

    work = "int64" if isinstance(mul, int) else "float64"
    x = i if work == "int64" else node("astype", [i], work)
    x = node("multiply", [x, node("const", [], work, value=mul)], work)
    if add:
        x = node("add", [x, node("const", [], work, value=add)], work)
    return x if v.dtype == work else node("astype", [x], v.dtype)
