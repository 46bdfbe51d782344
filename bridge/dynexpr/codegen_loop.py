"""dynexpr.codegen_loop — a loop node (Note [loop nodes], ir.py) as C++: its body is
scheduled and generated like any graph, as a function `static void bodyN(dxk::frame&)`
of the same unit, and the loop kernel calls it once per iteration from a C++ `for`:

    // kernel 1: loop -> tmp[0]
    auto L3_c0 = dxk::eval_fresh<true>(x0);           // carried arrays: owned copies
    const auto L3_v0 = dxk::eval_fresh<true>(x1);     // invariants: evaluated once
    const std::int64_t L3_stop = dxk::eval_fresh<true>(x2).data()[0];
    auto L3_o0 = dx::Tensor<double>::empty(dx::Shape{9});   // the body's outputs
    for (std::int64_t i = 0; i < L3_stop; i += 1) {
      ... dx_array descriptors of (i, carried, invariants) and (outputs) ...
      body0(frame);                                   // the body unit, checked as any call
      std::swap(L3_c0, L3_o0);                        // ping-pong: exit becomes entry
    }

A body of scalar work (0-d values, single elements of arrays) is written inline as C++
scalars instead, without a body function or a frame per trip (Note [scalar loop bodies]
in codegen_scalar.py).

A carried array the body updates through slices (`out[:, j] = ...`) is written in place
(Note [carried arrays in place]); any other carried array ping-pongs between its entry
and an output buffer, which costs no copy. The unit's size is the body's, whatever the
trip count.

Note [carried arrays in place]
A body's exit value of carried array k that is a chain of setitems on its own entry
(input k+1) is, in NumPy, the same array updated: the body becomes a graph that mutates
input k+1 (the loop's buffer L<id>_c<k>) instead of returning a new array, and the
schedule's in-place rules (Note [in-place writes], schedule.py) decide as for any
mutated argument: the write goes straight into the buffer when every read of the entry
content happens before it or in the writing kernel itself (dx::assign then takes a
temporary of the written region only if the read overlaps it: `u[1:-1] = u[:-2] + u[2:]`,
Note [aliasing] in assign.hpp), else into a temporary copied back at the body's end.
A trip then touches only the region it updates; copying the whole array every trip made
`out[:, j] = out[:, j-1] * a + x[:, j]` 4x and `x[i] = a * x[i-1] + b[i]` 50x slower
than NumPy. Not in place: a carried array whose entry (or another version of it) is also
another carried array's exit (`a, b = b, f(a)`): that one needs the entry's old content
after the body, so it keeps its own output buffer.

Note [carried buffers taken over]
A carried array's entry value that is a temporary of the unit read by nothing but the
loop (the typical `out = np.empty((T, n)); out[0] = x0; for t in range(1, T): out[t] =
...`) is moved into the loop's carried buffer instead of copied: the copy of a 16 MB
trajectory cost as much as the 2000 trips that fill it, and its second 16 MB block made
glibc return memory to the system at each call's end, so every call faulted 32 MB in
again (7800 page faults a call, against 54 for the plain function).
"""

from __future__ import annotations

from . import codegen_scalar, ir, manifest
from .schedule import schedule

CTYPE = manifest.CTYPE

# Emitted once per unit that has loops: dx_array descriptors of the body's arguments.
HELPERS = [
    "",
    "template <class T>",
    "static dx_array dxl_arg(T* data, const dx::Shape& s, const dx::Strides& st) {",
    "  return dx_array{const_cast<void*>(static_cast<const void*>(data)),",
    "                  dxk::code_of<std::remove_const_t<T>>(), static_cast<std::int32_t>(s.size()),",
    "                  s.begin(), st.begin(), dx_device{DX_DEVICE_CPU, 0}};",
    "}",
    "template <class A>",
    "static dx_array dxl_of(A& a) { return dxl_arg(a.data(), a.shape(), a.strides()); }",
]


def all_ops(graph: ir.Graph) -> set[str]:
    """The ops of `graph` and of its loops' bodies, nested."""
    ops, todo = set(), [graph]
    while todo:
        g = todo.pop()
        for v in g.values:
            ops.add(v.op)
            if v.op == "loop":
                todo.append(v.attr("body").graph)
    return ops


def carried_name(loop: ir.Value, k: int) -> str:
    return f"L{loop.id}_c{k}"


def emit_loop(unit, v: ir.Value, b) -> None:
    """Emits loop node v into `unit` (a codegen._Unit); its trip count goes to buffer b,
    its carried arrays' final values stay in L<id>_c<k> for its loop_out kernels."""
    body = v.attr("body").graph
    n = v.attr("carried")
    if codegen_scalar.qualifies(body, n):  # Note [scalar loop bodies]
        L = _prologue(unit, v)
        codegen_scalar.emit_body(unit, L, body, [carried_name(v, k) for k in range(n)],
                                 loop_range(v, L, n))
        _trip_count(unit, L, b)
        return
    inits, invariants = v.args[1:1 + n], v.args[1 + n:]
    body, in_place = _in_place(body)
    bs = schedule(body, unit.s.fuse)
    if any(w and k - 1 not in in_place for k, (_, _, w) in enumerate(bs.inputs)):
        raise NotImplementedError("dynexpr codegen: a loop body that writes its inputs")
    # A unit of the same class as the caller's (codegen imports this module, not the
    # other way round). Named once its own loops' bodies (a nested loop: Note [nested
    # loops] in capture/reroll.py) are in unit.functions, so every name is new.
    lines = type(unit)(bs, unit.functions, unit.direct_fns).function("body_")
    fname = f"body{len(unit.functions)}"
    lines[0] = lines[0].replace("body_(", f"{fname}(", 1)
    shared = _same_function(unit.functions, lines)
    if shared is None:
        unit.functions.extend([""] + lines)
    else:
        fname = shared

    L = _prologue(unit, v)
    emit = unit.emit
    for ob in bs.outputs:
        emit(f"auto {L}_o{ob.index} = dx::Tensor<{CTYPE[ob.dtype]}>::empty("
             f"{unit.shape(ob.shape)});")
    # Results the body returns as one of its inputs (a carried array passed on, or an
    # invariant) are copied into a scratch first: all exits are read before any swap.
    results = bs.results
    shared = {r for r in results if r >= 0 and results.count(r) > 1}
    # Carried k whose exit is its own entry (-(k+2)): updated in place, or unchanged.
    kept = {k for k, r in enumerate(results) if r == -(k + 2)}
    for k, r in enumerate(results):
        if k not in kept and (r < 0 or r in shared):
            emit(f"auto {L}_p{k} = dx::Tensor<{CTYPE[inits[k].dtype]}>::empty("
                 f"{unit.shape(inits[k].shape)});")
    emit(f"std::int64_t {L}_i = 0, {L}_trip = 0;")
    emit(f"const dx::Shape {L}_s{{}};")
    emit(f"const dx::Strides {L}_z{{}};")
    emit(loop_range(v, L, n))
    args = [f"dxl_arg(&{L}_i, {L}_s, {L}_z)"]
    args += [f"dxl_of({carried_name(v, k)})" for k in range(n)]
    args += [f"dxl_of({L}_v{k})" for k in range(len(invariants))]
    outs = [f"dxl_of({L}_o{ob.index})" for ob in bs.outputs]
    emit(f"  {L}_i = i;")
    emit(f"  ++{L}_trip;")
    emit(f"  const dx_array {L}_in[] = {{{', '.join(args)}}};")
    if outs:
        emit(f"  const dx_array {L}_out[] = {{{', '.join(outs)}}};")
    out_ptr = f"{L}_out" if outs else "nullptr"
    emit(f"  dxk::frame {L}_f({L}_in, {len(args)}, {out_ptr}, {len(outs)}, "
         f"{len(args)}, {len(outs)});")
    emit(f"  {fname}({L}_f);")
    entry = [carried_name(v, k) for k in range(n)] + [f"{L}_v{k}" for k in range(len(invariants))]
    for k, r in enumerate(results):
        if k in kept:
            continue
        if r < 0:  # body input -r-1: 0 is i (never carried: its dtype/shape differ)
            emit(f"  dx::assign({L}_p{k}, {entry[-r - 2]});")
        elif r in shared:
            emit(f"  dx::assign({L}_p{k}, {L}_o{r});")
    for k, r in enumerate(results):
        if k in kept:
            continue
        other = f"{L}_p{k}" if (r < 0 or r in shared) else f"{L}_o{r}"
        emit(f"  std::swap({carried_name(v, k)}, {other});")
    emit("}")
    _trip_count(unit, L, b)


def _prologue(unit, v: ir.Value) -> str:
    """Emits what loop v reads before its first trip: its carried buffers L<id>_c<k>
    (owned copies), invariants L<id>_v<k> (evaluated once) and L<id>_stop; returns the
    prefix L<id>."""
    n = v.attr("carried")
    stop, inits, invariants = v.args[0], v.args[1:1 + n], v.args[1 + n:]
    L = f"L{v.id}"
    for k, a in enumerate(inits):
        init = f"std::move({unit.ref(a)})" if _taken_over(unit, v, a) else _fresh(unit, a)
        unit.emit(f"auto {carried_name(v, k)} = {init};")
    for k, a in enumerate(invariants):
        unit.emit(f"const auto {L}_v{k} = {_fresh(unit, a)};")
    unit.emit(f"const std::int64_t {L}_stop = {_fresh(unit, stop)}.data()[0];")
    return L


def loop_range(v: ir.Value, L: str, n: int) -> str:
    """The C++ `for (...) {` header of loop v's trips, i the loop variable."""
    start, step = v.attr("start"), v.attr("step")
    cmp = "<" if step > 0 else ">"
    if isinstance(start, tuple):  # ("dyn", k, mul, add): Note [loop nodes], ir.py
        _, k, mul, add = start
        start = f"{mul} * {L}_v{k - 1 - n}.data()[0] + {add}"
    return f"for (std::int64_t i = {start}; i {cmp} {L}_stop; i += {step}) {{"


def _trip_count(unit, L: str, b) -> None:
    """The trips the loop ran, into its buffer b (after the loop)."""
    dest = unit.buffer_ref(b)
    if b.kind == "tmp" and b.index not in unit.declared_tmp:
        unit.declared_tmp.add(b.index)
        unit.emit(f"auto {dest} = dx::Tensor<std::int64_t>::empty(dx::Shape{{}});")
    unit.emit(f"dx::assign({dest}, dx::scalar<std::int64_t>({L}_trip));")
    if b.kind == "out":
        unit.written_out.add(b.index)


def _same_function(functions: list[str], lines: list[str]) -> str | None:
    """The name of a body function already emitted with the same text as `lines` (loops
    with one body: the red and black sweeps of each outer step), or None. The unit
    then compiles each distinct body once, however many loop nodes run it."""
    text = lines[1:]
    k = 0
    while k < len(functions):
        line = functions[k]
        if line.startswith("static void body") and k + len(lines) <= len(functions):
            if functions[k + 1:k + len(lines)] == text and (
                    k + len(lines) == len(functions) or functions[k + len(lines)] == ""):
                return line.split("(")[0].split()[-1]
        k += 1
    return None


def _in_place(body: ir.Graph) -> tuple[ir.Graph, set[int]]:
    """body as a graph that mutates the entries of the carried arrays it may update in
    place (Note [carried arrays in place]), and the numbers k of those carried arrays."""
    roots = [_chain_input(o) for o in body.outputs]
    ks = {k for k, o in enumerate(body.outputs)
          if o.op == "setitem" and roots[k] == k + 1 and roots.count(k + 1) == 1}
    if not ks:
        return body, ks
    g = ir.Graph(values=body.values, outputs=body.outputs, quiet=body.quiet,
                 mutations=[(k + 1, body.outputs[k]) for k in sorted(ks)])
    return g, ks


def _chain_input(v: ir.Value) -> int | None:
    """The body input v is a version of (through setitem bases), if any."""
    while v.op == "setitem":
        v = v.args[0]
    return v.attr("index") if v.op == "input" else None


def _taken_over(unit, loop: ir.Value, a: ir.Value) -> bool:
    """Whether carried array a's buffer can become the loop's own (Note [carried buffers
    taken over]): a temporary of this unit that nothing but this loop reads, once."""
    st = unit.storage(a)
    return (getattr(st, "kind", None) == "tmp" and st.index in unit.declared_tmp
            and all(u is loop for u in unit.s.users.get(a.id, ()))
            and sum(x is a for x in loop.args) == 1)


def _fresh(unit, a: ir.Value) -> str:
    """An owned, C-contiguous copy of loop argument a, evaluated once before the loop."""
    if a.op == "const":
        return (f"dx::Tensor<{CTYPE[a.dtype]}>(dx::Shape{{}}, "
                f"{unit.literal(a.attr('value'), a.dtype)})")
    return f"dxk::eval_fresh<true>({unit.ref(a)})"
