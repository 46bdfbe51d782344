"""The C guard check (dynexpr._native.GuardSet) against the Python reference
(dynexpr.guards.GuardSet): same guards, same calls, same answer."""

import numpy as np
import pytest

_native = pytest.importorskip("dynexpr._native", reason="the native extension is not built "
                              "(pip install -e . --no-build-isolation -Cbuild-dir=build-py)")

from dynexpr import guards as G

SCALE = 2.0
TABLE = {"a": 1, "b": 2.0}


class Obj:
    def __init__(self):
        self.flag = True
        self.arr = np.zeros((2, 3), np.float32)


def make_fn():
    offset = 3

    def fn(x, y, z=None):
        return x * SCALE + y + offset + len(TABLE)

    return fn


FN = make_fn()
base = np.arange(24, dtype=np.float64).reshape(4, 6)
VALUES = [
    np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float64), np.zeros((3, 2), np.float32),
    np.zeros((2, 3), ">f4"), np.zeros(6, np.int32)[::2], base, base.T, base[:, 1:],
    base[1:3], np.zeros(0), np.float32(1.5), np.float64("nan"), float("nan"), 1, 1.0, True,
    None, "s", (1, 2.0), (1, 2), [1, 2], {"a": 1, "b": 2.0}, {"b": 2.0, "a": 1}, Obj(), Obj,
]
RO = np.zeros(3)
RO.flags.writeable = False
VALUES.append(RO)


def guard_cases():
    arg = ("arg", 0)
    cases = [
        G.Guard("TYPE", arg, np.ndarray), G.Guard("TYPE", arg, float), G.Guard("TYPE", arg, int),
        G.Guard("DTYPE", arg, np.dtype("float32")), G.Guard("DTYPE", arg, np.dtype(">f4")),
        G.Guard("DTYPE", arg, np.dtype("float64")),
        G.Guard("NDIM", arg, 2), G.Guard("NDIM", arg, 0),
        G.Guard("SHAPE", arg, (2, 3)), G.Guard("SHAPE", arg, (4, 6)), G.Guard("SHAPE", arg, ()),
        G.Guard("STRIDES_CLASS", arg, "C"), G.Guard("STRIDES_CLASS", arg, "strided"),
        G.Guard("VALUE", arg, 1), G.Guard("VALUE", arg, 1.0), G.Guard("VALUE", arg, True),
        G.Guard("VALUE", arg, float("nan")), G.Guard("VALUE", arg, (1, 2.0)),
        G.Guard("VALUE", arg, {"a": 1, "b": 2.0}), G.Guard("VALUE", arg, None),
        G.Guard("VALUE", arg, [1, 2]), G.Guard("VALUE", arg, "s"),
        G.Guard("ID", arg, None), G.Guard("ID", arg, Obj), G.Guard("ID", arg, base),
        G.Guard("LEN", arg, 2), G.Guard("LEN", arg, 4),
        G.Guard("DICT_KEYS", arg, ("a", "b")),
        G.Guard("WRITEABLE", arg, True), G.Guard("WRITEABLE", arg, False),
    ]
    return cases


@pytest.mark.parametrize("g", guard_cases(), ids=str)
def test_each_kind_matches_the_reference(g):
    py, c = G.GuardSet([g]), _native.GuardSet([g])
    answers = set()
    for v in VALUES:
        want = py.failing((v,), FN) is None
        assert c.check((v,), FN) == want, (g, v)
        answers.add(want)
    assert answers == {True, False}, f"{g}: the value pool does not exercise both outcomes"


def test_sources_match_the_reference():
    o = Obj()
    sources_and_expected = [
        (("global", "SCALE"), "VALUE", 2.0),
        (("global", "SCALE"), "VALUE", 3.0),
        (("global", "len"), "ID", len),              # a builtin, through __builtins__
        (("global", "TABLE"), "DICT_KEYS", ("a", "b")),
        (("item", ("global", "TABLE"), "b"), "VALUE", 2.0),
        (("item", ("global", "TABLE"), "zz"), "VALUE", 2.0),   # missing key: fails
        (("closure", "offset"), "VALUE", 3),
        (("closure", "nope"), "VALUE", 3),
        (("attr", ("arg", 1), "flag"), "VALUE", True),
        (("attr", ("arg", 1), "arr"), "SHAPE", (2, 3)),
        (("attr", ("arg", 1), "missing"), "VALUE", 1),
        (("type", ("arg", 1)), "ID", Obj),
        (("item", ("arg", 2), 0), "VALUE", 1),
        (("arg", 5), "VALUE", 1),                     # no such argument: fails
    ]
    args = (np.zeros(3), o, (1, 2))
    for src, kind, exp in sources_and_expected:
        g = G.Guard(kind, src, exp)
        want = G.GuardSet([g]).failing(args, FN) is None
        assert _native.GuardSet([g]).check(args, FN) == want, g


def test_alias_guards_match_the_reference():
    a = np.arange(10.0)
    pairs = [(a, a), (a, a[2:5]), (a[:5], a[5:]), (a, np.arange(3.0)), (a[::2], a[1::2]),
             (a[:0], a)]
    for x, y in pairs:
        for rel in ("same", "overlap", "disjoint"):
            g = G.Guard("ALIAS", (("arg", 0), ("arg", 1)), rel)
            want = G.GuardSet([g]).failing((x, y), FN) is None
            assert _native.GuardSet([g]).check((x, y), FN) == want, (rel, x, y)


def test_dynamic_shape_guards_match_the_reference():
    arrays = [np.zeros(n) for n in (0, 1, 2, 5, 10, 11)] + [np.zeros((5, 4)), np.zeros((10, 5))]
    shapes = [((2, None),), ((2, 10),), ((5, 10),), ((2, None), 4), (5, (2, None)), (10,)]
    for x in arrays:
        for exp in shapes:
            g = G.Guard("DYN_SHAPE", ("arg", 0), exp)
            want = G.GuardSet([g]).failing((x,), FN) is None
            assert _native.GuardSet([g]).check((x,), FN) == want, (exp, x.shape)
    for x, y in ((np.zeros(5), np.zeros(5)), (np.zeros(5), np.zeros(6)),
                 (np.zeros((3, 5)), np.zeros(5)), (np.zeros((5, 3)), np.zeros(5))):
        for axes in ((0, 0), (1, 0)):
            g = G.Guard("DIM_EQ", (("arg", 0), ("arg", 1)), axes)
            want = G.GuardSet([g]).failing((x, y), FN) is None
            assert _native.GuardSet([g]).check((x, y), FN) == want, (axes, x.shape, y.shape)


def test_failing_returns_the_first_failing_guard_and_select_dispatches():
    gs = [G.Guard("TYPE", ("arg", 0), np.ndarray), G.Guard("DTYPE", ("arg", 0), np.dtype("f4")),
          G.Guard("SHAPE", ("arg", 0), (None, 3))]   # None: any extent (dynamic)
    c = _native.GuardSet(gs)
    assert len(c) == 3
    assert c.failing((np.zeros((7, 3), np.float32),), FN) is None
    assert c.failing((np.zeros((7, 4), np.float32),), FN) is gs[2]
    assert c.failing((np.zeros((7, 3)),), FN) is gs[1]
    assert c.failing((1.0,),) is gs[0]
    entries = [(c, "first"), (_native.GuardSet([G.Guard("TYPE", ("arg", 0), float)]), "second")]
    assert _native.select(entries, (np.zeros((1, 3), np.float32),), FN) == "first"
    assert _native.select(entries, (2.0,), FN) == "second"
    assert _native.select(entries, ("x",), FN) is None
    # Tuples are accepted as guards too.
    assert _native.GuardSet([("NDIM", ("arg", 0), 1)]).check((np.zeros(2),))


def test_bad_guards_are_rejected_with_a_clear_error():
    with pytest.raises(ValueError, match="unknown kind"):
        _native.GuardSet([("SIZE", ("arg", 0), 3)])
    with pytest.raises(ValueError, match="malformed source"):
        _native.GuardSet([("VALUE", ("argument", 0), 3)])
    with pytest.raises(ValueError, match="STRIDES_CLASS"):
        _native.GuardSet([("STRIDES_CLASS", ("arg", 0), "F")])


def test_guard_kinds_come_from_the_one_table():
    # Note [guard kinds are listed once]: the C checker's kinds and codes are generated
    # from dynexpr.guard_kinds, and guards.py takes its constants from it too.
    from dynexpr import guard_kinds as K

    assert G.KINDS == K.KINDS and G.PAIR_KINDS == K.PAIR_KINDS
    assert _native.GUARD_KINDS == {name: code for code, (name, _, native) in enumerate(K.TABLE)
                                   if native}
    expected = {"TYPE": np.ndarray, "DTYPE": np.dtype("float32"), "NDIM": 1, "SHAPE": (3,),
                "STRIDES_CLASS": "C", "VALUE": 1, "ID": None, "LEN": 3, "DICT_KEYS": ("a",),
                "WRITEABLE": True, "ALIAS": "same", "DYN_SHAPE": ((1, None),),
                "DIM_EQ": (0, 0), "CMP": ("<", 1, True, True)}
    assert set(expected) == set(K.KINDS), "a new kind: give it a sample expected value here"
    for name, pair, native in K.TABLE:
        guard = (name, (("arg", 0), ("arg", 1)) if pair else ("arg", 0), expected[name])
        if native:
            assert len(_native.GuardSet([guard])) == 1
        else:  # checked in Python only: the entry keeps its guards in Python
            with pytest.raises(ValueError, match=f"kind {name}, which is checked in Python"):
                _native.GuardSet([guard])


def test_randomised_against_the_reference():
    rng = np.random.default_rng(0)
    pool = guard_cases()
    for _ in range(300):
        gs = [pool[i] for i in rng.choice(len(pool), size=3)]
        v = VALUES[rng.integers(len(VALUES))]
        py = G.GuardSet(gs).failing((v,), FN)
        c = _native.GuardSet(gs).failing((v,), FN)
        assert (py is None) == (c is None)
        if py is not None:
            assert c is py
