"""dynexpr.blas_fold — folds the scale and bias around a product into its BLAS call.

Note [alpha/beta folding]
BLAS computes C = alpha op(A) op(B) + beta C in one pass over C. A captured
`alpha * A @ B + beta * C`, `A @ x + b` or `(A @ B) * s` would otherwise be a product
into a temporary and a pointwise pass over it: one more write and read of the result,
which at 2000x2000 costs as much as the pointwise work itself. Before scheduling, a
matmul value whose only user scales it by a 0-d value, or adds an array to it, is
rewritten into one extended matmul value

    matmul(a, b[, alpha][, c])    attrs scaled, bias    = alpha * (a @ b) + c

that codegen emits as `c` (any pointwise expression, broadcast to the result) written
into the destination first, then one dx::matmul_into with accumulate, i.e. BLAS's beta
= 1 (include/dynexpr/interop/matmul.hpp). A 0-d scale of an operand (`(alpha * A) @ B`,
the way Python parses `alpha * A @ B`) is taken as alpha too, so A is read in place, not
scaled into a temporary. The 1-D operands' reshapes (ir.py: matmul is 2-D) are dropped
with the result's, so `A @ x` writes straight into a 1-D output buffer.

A bias is not folded into a Gram product (`X.T @ X + lam * np.eye(n)`): BLAS computes those
with syrk, which takes no beta (Note [Gram products] in include/dynexpr/interop/matmul.hpp),
and gemm with the bias cost more than syrk and a fused add (5000 x 200 float64: 4.9 ms
against NumPy's 4.2 ms).

Only float32/float64 products fold, and only where every value involved has the product's
dtype: then NumPy casts the scale and the bias to that dtype too, and the result differs
from NumPy's only by BLAS's rounding order. Values the code returns or writes back are
never folded away (their own content is needed).
"""

from __future__ import annotations

from . import ir

FLOATS = ("float32", "float64")


def fold(outputs: list[ir.Value], mutated: dict[int, ir.Value]):
    """(outputs, mutated) with the folds of Note [alpha/beta folding] applied."""
    roots = list(outputs) + list(mutated.values())
    values = ir.walk(roots)
    users: dict[int, list[ir.Value]] = {v.id: [] for v in values}
    for v in values:
        for a in v.args:
            users[a.id].append(v)
    kept = {v.id for v in roots}
    next_id = [1 + max((v.id for v in values), default=0)]
    replace: dict[int, ir.Value] = {}
    taken: set[int] = set()  # values already folded into a product (two products, one add)

    def only_user(v):
        us = users[v.id]
        return us[0] if len(us) == 1 and v.id not in kept and us[0].id not in taken else None

    for m in values:
        if m.op != "matmul" or len(m.args) != 2 or m.dtype not in FLOATS:
            continue
        a, b = m.args
        alpha = c = None
        cur = m
        chain = [m]  # m and the users folded into it, the last one replaced
        u = only_user(cur)
        if u is not None and u.op == "reshape":
            sa, sb = _vector(a, left=True), _vector(b, left=False)
            want = tuple(([] if sa is not None else [m.shape[0]])
                         + ([] if sb is not None else [m.shape[1]]))
            if (sa is not None or sb is not None) and tuple(u.shape) == want:
                a, b, cur = a if sa is None else sa, b if sb is None else sb, u
                chain.append(u)
        u = only_user(cur)
        if cur is not m and u is not None and u.op == "astype" and u.dtype == m.dtype:
            cur = u  # the copy that makes a view (the reshaped result) an output
            chain.append(u)
        a, alpha = _scaled(a, m.dtype)
        if alpha is None:
            b, alpha = _scaled(b, m.dtype)
        u = only_user(cur)
        if alpha is None and u is not None and u.op == "multiply" and u.dtype == m.dtype:
            s = _other(u, cur)
            if s is not None and _scalar(s):
                alpha, cur = s, u
                chain.append(u)
        u = only_user(cur)
        if u is not None and u.op in ("add", "subtract") and u.dtype == m.dtype \
                and tuple(u.shape) == tuple(cur.shape) and not _gram(a, b):
            e = _other(u, cur)
            if e is not None and (u.op == "add" or u.args[0] is cur):
                if u.op == "subtract":
                    e = ir.Value("negative", (e,), e.dtype, e.shape, (), next_id[0])
                    next_id[0] += 1
                c, cur = e, u
                chain.append(u)
        if cur is m and alpha is None and (a, b) == m.args:
            continue
        taken.update(x.id for x in chain)
        args = (a, b) + ((alpha,) if alpha is not None else ()) + ((c,) if c is not None else ())
        attrs = ir.make_attrs(scaled=alpha is not None, bias=c is not None)
        replace[cur.id] = ir.Value("matmul", args, m.dtype, tuple(cur.shape), attrs, cur.id)
    if not replace:
        return outputs, mutated
    new: dict[int, ir.Value] = {}

    def rebuilt(v: ir.Value) -> ir.Value:
        return new.get(v.id, v)

    # Arguments before users, each value once, on an explicit stack (Note [no recursion
    # on graph depth] in ir.py); a replaced value brings its new arguments.
    done: set[int] = set()
    for root in roots:
        stack = [root]
        while stack:
            v = stack[-1]
            if v.id in done:
                stack.pop()
                continue
            r = replace.get(v.id, v)
            todo = [x for x in r.args if x.id not in done]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            done.add(v.id)
            args = tuple(rebuilt(x) for x in r.args)
            if r is not v or any(x is not y for x, y in zip(args, r.args)):
                new[v.id] = ir.Value(r.op, args, r.dtype, r.shape, r.attrs, r.id)
    return [rebuilt(o) for o in outputs], {i: rebuilt(v) for i, v in mutated.items()}


def _gram(a: ir.Value, b: ir.Value) -> bool:
    """Whether a @ b is a matrix times its own transpose (syrk's product)."""
    return any(t.op == "transpose" and len(t.shape) == 2 and t.args[0] is o
               for t, o in ((a, b), (b, a)))


def _vector(v: ir.Value, left: bool) -> ir.Value | None:
    """The 1-D array a matmul operand is NumPy's row (left) or column promotion of."""
    if v.op != "reshape" or len(v.shape) != 2 or len(v.args[0].shape) != 1:
        return None
    k = v.args[0].shape[0]
    return v.args[0] if tuple(v.shape) == ((1, k) if left else (k, 1)) else None


def _scalar(s: ir.Value) -> bool:
    """A 0-d value codegen reads as a number: a constant or a 0-d argument."""
    return tuple(s.shape) == () and s.op in ("const", "input")


def _other(u: ir.Value, x: ir.Value) -> ir.Value | None:
    """u's other argument (u binary, x exactly one of its arguments)."""
    if len(u.args) != 2 or (u.args[0] is x) == (u.args[1] is x):
        return None
    return u.args[1] if u.args[0] is x else u.args[0]


def _scaled(v: ir.Value, dtype: str):
    """(X, s) when operand v is X * s with s a 0-d scale, all of the product's dtype;
    else (v, None)."""
    if v.op != "multiply" or v.dtype != dtype:
        return v, None
    for x, s in (v.args, v.args[::-1]):
        if _scalar(s) and x.dtype == dtype and tuple(x.shape) == tuple(v.shape):
            return x, s
    return v, None
