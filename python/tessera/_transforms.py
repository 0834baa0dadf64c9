"""The function transforms of tessera.core over pytrees:
grad, value_and_grad, vjp, jvp, vmap, checkpoint, custom_function (and the
printoptions context manager, also written in Python). The native
module differentiates and vectorises flat lists of arrays; this module maps
nested lists, tuples and dicts onto them and checks argnums / argnames."""

import contextlib
import functools

from . import core as _core

array = _core.array


# ---- pytrees ---------------------------------------------------------------

# The tree walks are module-level functions that pass their accumulators
# along: a nested function that calls itself is a reference cycle, and one
# holding arrays would keep them (and their memory) alive until Python's
# cycle collector runs.

def _flatten(t, leaves):
    if isinstance(t, (list, tuple)):
        return (type(t), [_flatten(c, leaves) for c in t])
    if isinstance(t, dict):
        return (type(t), {k: _flatten(v, leaves) for k, v in t.items()})
    leaves.append(t)
    return None


def tree_flatten(tree):
    """Leaves of a tree (depth first) and the structure to rebuild it."""
    leaves = []
    structure = _flatten(tree, leaves)
    return leaves, structure


def _build(s, it):
    if s is None:
        return next(it)
    typ, children = s
    if issubclass(typ, dict):
        return typ((k, _build(c, it)) for k, c in children.items())
    values = [_build(c, it) for c in children]
    if typ is list:
        return values
    if typ is tuple:
        return tuple(values)
    if hasattr(typ, "_fields"):  # namedtuple
        return typ(*values)
    return typ(values)


def tree_unflatten(structure, leaves):
    return _build(structure, iter(leaves))


def _prefix_walk(p, t, what, out):
    if p is None or isinstance(p, int):
        out.extend([p] * len(tree_flatten(t)[0]))
    elif isinstance(t, array) and isinstance(p, (tuple, list)) and len(p) == 1:
        out.append(p[0])
    elif isinstance(p, (list, tuple)) and isinstance(t, (list, tuple)):
        if len(p) != len(t):
            raise ValueError(
                f"[vmap] {what} has {len(p)} entries where the tree has {len(t)}")
        for a, b in zip(p, t):
            _prefix_walk(a, b, what, out)
    elif isinstance(p, dict) and isinstance(t, dict):
        if set(p) != set(t):
            raise ValueError(f"[vmap] {what} keys {sorted(p)} do not match {sorted(t)}")
        for k in t:
            _prefix_walk(p[k], t[k], what, out)
    else:
        raise ValueError(f"[vmap] {what} {p!r} does not match the tree {t!r}")


def _prefix_leaves(prefix, tree, what):
    """One value of the prefix tree per leaf of tree (vmap's in_axes / out_axes)."""
    out = []
    _prefix_walk(prefix, tree, what, out)
    return out


def _as_list(out, op):
    if isinstance(out, array):
        return [out]
    if isinstance(out, (list, tuple)) and all(isinstance(o, array) for o in out):
        return list(out)
    raise ValueError(f"[{op}] the function must return an array or a list of arrays")


# ---- grad / value_and_grad -------------------------------------------------

def _normalize_argnums(argnums, argnames, op):
    if isinstance(argnames, str):
        argnames = [argnames]
    argnames = list(argnames)
    if argnums is None:
        argnums = [] if argnames else 0
    single = isinstance(argnums, int)
    nums = [argnums] if single else list(argnums)
    if not nums and not argnames:
        raise ValueError(f"[{op}] no arguments to differentiate: give argnums or argnames")
    for n in nums:
        if not isinstance(n, int):
            raise TypeError(f"[{op}] argnums must be ints, got {n!r}")
        if n < 0:
            raise ValueError(f"[{op}] argnums must be non-negative ints, got {n!r}")
    if len(set(nums)) != len(nums):
        raise ValueError(f"[{op}] repeated index in argnums {nums}")
    return single, sorted(nums), argnames


def _value_and_grad(fun, argnums, argnames, op, allow_tuple):
    single, nums, names = _normalize_argnums(argnums, argnames, op)

    def wrapper(*args, **kwargs):
        for n in nums:
            if n >= len(args):
                raise ValueError(
                    f"[{op}] argnum {n} is out of range for a call with {len(args)} "
                    "positional arguments")
        for name in names:
            if name not in kwargs:
                raise ValueError(f"[{op}] the keyword argument '{name}' was not passed")
        trees = [args[n] for n in nums] + [kwargs[k] for k in names]
        leaves, structure = tree_flatten(trees)
        for leaf in leaves:
            if not isinstance(leaf, array):
                raise ValueError(
                    f"[{op}] the arguments to differentiate may only hold arrays, "
                    f"found {type(leaf).__name__}")
        result = {}

        def flat(xs):
            new = tree_unflatten(structure, xs)
            a, kw = list(args), dict(kwargs)
            for n, t in zip(nums, new):
                a[n] = t
            for k, t in zip(names, new[len(nums):]):
                kw[k] = t
            out = fun(*a, **kw)
            result["value"] = out
            first = out[0] if allow_tuple and isinstance(out, tuple) and out else out
            if not isinstance(first, array) or first.ndim != 0:
                shape = getattr(first, "shape", None)
                raise ValueError(
                    f"[{op}] the function must return a scalar array (shape ()) "
                    f"{'or a tuple starting with one ' if allow_tuple else ''}"
                    f"but returned {type(first).__name__}"
                    f"{'' if shape is None else ' of shape ' + str(shape)}")
            return [first]

        _, grads = _core._value_and_grad_flat(flat, leaves)
        grad_trees = tree_unflatten(structure, grads)
        pos = grad_trees[: len(nums)]
        pos_grads = (pos[0] if single else tuple(pos)) if nums else None
        if names:
            grads_out = (pos_grads, dict(zip(names, grad_trees[len(nums):])))
        else:
            grads_out = pos_grads
        return result["value"], grads_out

    return wrapper


def _check_callable(fun, op):
    if not callable(fun):
        raise TypeError(f"[{op}] fun must be callable, got {type(fun).__name__}")


def value_and_grad(fun, argnums=None, argnames=[]):
    """fun's value and its gradient with respect to the arguments at argnums / argnames."""
    _check_callable(fun, "value_and_grad")
    f = _value_and_grad(fun, argnums, argnames, "value_and_grad", True)
    return functools.wraps(fun)(f)


def grad(fun, argnums=None, argnames=[]):
    """The gradient of a scalar-valued fun with respect to argnums / argnames."""
    _check_callable(fun, "grad")
    f = _value_and_grad(fun, argnums, argnames, "grad", False)

    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        return f(*args, **kwargs)[1]

    return wrapper


# ---- vjp / jvp -------------------------------------------------------------

def _check_arrays(xs, what, op):
    xs = list(xs)
    for x in xs:
        if not isinstance(x, array):
            raise ValueError(f"[{op}] {what} must be arrays, found {type(x).__name__}")
    return xs


def vjp(fun, primals, cotangents):
    """(outputs, vjps): vector-Jacobian products of fun(*primals) with cotangents."""
    primals = _check_arrays(primals, "primals", "vjp")
    cotangents = _check_arrays(cotangents, "cotangents", "vjp")
    return _core._vjp_flat(lambda xs: _as_list(fun(*xs), "vjp"), primals, cotangents)


def jvp(fun, primals, tangents):
    """(outputs, jvps): Jacobian-vector products of fun(*primals) with tangents."""
    primals = _check_arrays(primals, "primals", "jvp")
    tangents = _check_arrays(tangents, "tangents", "jvp")
    return _core._jvp_flat(lambda xs: _as_list(fun(*xs), "jvp"), primals, tangents)


# ---- vmap ------------------------------------------------------------------

def vmap(fun, in_axes=0, out_axes=0):
    """fun vectorised over the in_axes of its inputs; results mapped to out_axes."""
    _check_callable(fun, "vmap")

    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        if kwargs:
            raise ValueError("[vmap] keyword arguments are not supported")
        tree = args[0] if len(args) == 1 else args
        axes = _prefix_leaves(in_axes, tree, "in_axes")
        leaves, structure = tree_flatten(tree)
        flat_axes = []
        for leaf, ax in zip(leaves, axes):
            if not isinstance(leaf, array):
                raise ValueError(f"[vmap] inputs must be arrays, found {type(leaf).__name__}")
            if ax is None:
                flat_axes.append(-1)
                continue
            n = ax + leaf.ndim if ax < 0 else ax
            if n < 0 or n >= leaf.ndim:
                raise IndexError(
                    f"[vmap] in_axes {ax} is out of bounds for an input with {leaf.ndim} dimensions")
            flat_axes.append(n)
        if all(a == -1 for a in flat_axes):
            raise ValueError("[vmap] at least one input must be mapped (in_axes all None)")
        result = {}

        def flat(xs):
            new = tree_unflatten(structure, xs)
            out = fun(new) if len(args) == 1 else fun(*new)
            out_leaves, out_structure = tree_flatten(out)
            for o in out_leaves:
                if not isinstance(o, array):
                    raise ValueError(f"[vmap] outputs must be arrays, found {type(o).__name__}")
            result["structure"] = out_structure
            result["tree"] = out
            return out_leaves

        outs = _core._vmap_flat(flat, leaves, flat_axes)
        out_tree = tree_unflatten(result["structure"], outs)
        moved = []
        for o, ax in zip(outs, _prefix_leaves(out_axes, out_tree, "out_axes")):
            if ax is None:
                moved.append(o[0])
            elif ax == 0:
                moved.append(o)
            else:
                n = ax + o.ndim if ax < 0 else ax
                if n < 0 or n >= o.ndim:
                    raise IndexError(
                        f"[vmap] out_axes {ax} is out of bounds for an output with "
                        f"{o.ndim - 1} dimensions")
                moved.append(_core.moveaxis(o, 0, n))
        return tree_unflatten(result["structure"], moved)

    return wrapper


# ---- checkpoint / custom_function -------------------------------------------

def _split_arrays(tree):
    leaves, structure = tree_flatten(tree)
    idx = [i for i, leaf in enumerate(leaves) if isinstance(leaf, array)]
    return leaves, structure, idx


def _rebuild(leaves, structure, idx, xs):
    leaves = list(leaves)
    for i, x in zip(idx, xs):
        leaves[i] = x
    return tree_unflatten(structure, leaves)


def checkpoint(fun):
    """fun whose intermediates are recomputed in the backward pass instead of kept."""
    _check_callable(fun, "checkpoint")

    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        leaves, structure, idx = _split_arrays((args, kwargs))
        result = {}

        def flat(xs):
            a, kw = _rebuild(leaves, structure, idx, xs)
            out_leaves, out_structure = tree_flatten(fun(*a, **kw))
            result["structure"] = out_structure
            return out_leaves

        outs = _core._checkpoint_flat(flat, [leaves[i] for i in idx])
        return tree_unflatten(result["structure"], outs)

    return wrapper


class custom_function:
    """A function with transform rules of its own: .vjp, .jvp and .vmap register them."""

    def __init__(self, f):
        functools.update_wrapper(self, f)
        self.fun = f
        self._vjp = None
        self._jvp = None
        self._vmap = None

    def vjp(self, f):
        self._vjp = f
        return self

    def jvp(self, f):
        self._jvp = f
        return self

    def vmap(self, f):
        self._vmap = f
        return self

    def __call__(self, *args, **kwargs):
        leaves, structure, idx = _split_arrays(args)
        result = {}

        def primals_of(xs):
            a = _rebuild(leaves, structure, idx, xs)
            return a[0] if len(a) == 1 else tuple(a)

        def flat(xs):
            a = _rebuild(leaves, structure, idx, xs)
            out_leaves, out_structure = tree_flatten(self.fun(*a, **kwargs))
            result["structure"] = out_structure
            return out_leaves

        def pick(tree, like):
            got = tree_flatten(tree)[0]
            if len(got) != len(leaves):
                raise ValueError(
                    "[custom_function] the rule must return a tree with the structure of "
                    "the primals")
            return [got[i] if got[i] is not None else _core.zeros_like(like[k])
                    for k, i in enumerate(idx)]

        rule_vjp = rule_jvp = rule_vmap = None
        if self._vjp is not None:
            def rule_vjp(p, c, o):
                cot = tree_unflatten(result["structure"], c)
                out = tree_unflatten(result["structure"], o)
                return pick(self._vjp(primals_of(p), cot, out, **kwargs), p)
        if self._jvp is not None:
            if kwargs:
                raise ValueError("[custom_function] a jvp rule takes positional arguments only")

            def rule_jvp(p, t, argnums):
                full = [None] * len(idx)
                for k, n in enumerate(argnums):
                    full[n] = t[k]
                tangents = _rebuild([None if i in idx else leaf for i, leaf in enumerate(leaves)],
                                    structure, idx, full)
                tangents = tangents[0] if len(tangents) == 1 else tuple(tangents)
                return tree_flatten(self._jvp(primals_of(p), tangents))[0]
        if self._vmap is not None:
            if kwargs:
                raise ValueError("[custom_function] a vmap rule takes positional arguments only")

            def rule_vmap(inputs, axes):
                ax = _rebuild([None] * len(leaves), structure, idx,
                              [None if a < 0 else a for a in axes])
                ax = ax[0] if len(ax) == 1 else tuple(ax)
                outs, out_axes = self._vmap(primals_of(inputs), ax)
                out_leaves, out_structure = tree_flatten(outs)
                result["structure"] = out_structure
                flat_axes = _prefix_leaves(out_axes, outs, "out_axes")
                return out_leaves, [-1 if a is None else a for a in flat_axes]

        outs = _core._custom_function_flat(flat, rule_vjp, rule_jvp, rule_vmap,
                                           [leaves[i] for i in idx])
        return tree_unflatten(result["structure"], outs)


# ---- compile -------------------------------------------------------------------

class _RandomState:
    """random.state: a one-element list whose element is the calling thread's
    global key, for compile's implicit inputs and outputs."""

    def __len__(self):
        return 1

    def __getitem__(self, i):
        if i not in (0, -1):
            raise IndexError(f"[random.state] index {i} is out of range for 1 key")
        return _core.random._get_key()

    def __setitem__(self, i, key):
        if i not in (0, -1):
            raise IndexError(f"[random.state] index {i} is out of range for 1 key")
        _core.random._set_key(key)

    def __iter__(self):
        yield self[0]

    def __repr__(self):
        return f"[{self[0]!r}]"


def _slots_walk(t, slots):
    if isinstance(t, _RandomState):
        slots.append((t, 0))
    elif isinstance(t, dict):
        for k, v in t.items():
            if isinstance(v, array):
                slots.append((t, k))
            else:
                _slots_walk(v, slots)
    elif isinstance(t, list):
        for i, v in enumerate(t):
            if isinstance(v, array):
                slots.append((t, i))
            else:
                _slots_walk(v, slots)
    elif isinstance(t, tuple):
        for v in t:
            if isinstance(v, array):
                raise ValueError(
                    "[compile] an array in a tuple of implicit inputs or outputs cannot be "
                    "replaced: hold it in a list or a dict")
            _slots_walk(v, slots)


def _array_slots(tree):
    """(container, key) of every array in a tree of dicts (modules too) and lists,
    depth first: compile reads and replaces them in place."""
    slots = []
    if tree is not None:
        _slots_walk(tree, slots)
    return slots


def _constant_key(x):
    try:
        hash(x)
        return (type(x), x)
    except TypeError:
        return (type(x), id(x))


def _structure_key(s):
    if s is None:
        return None
    typ, children = s
    if isinstance(children, dict):
        return (typ, tuple((k, _structure_key(c)) for k, c in children.items()))
    return (typ, tuple(_structure_key(c) for c in children))


def compile(fun, inputs=None, outputs=None, shapeless=False):
    """fun traced once per signature and replayed from its recorded graph.

    The signature is the tree structure of the arguments, their non-array
    values, each array's dtype and shape, and the arrays of `inputs` (a tree
    of arrays read as implicit extra inputs, e.g. a model's and an optimizer's
    state). Arrays of `outputs` are replaced, in their containers, by the
    values the call computes for them. Arrays read from closures are frozen
    at the trace; evaluating values computed from the arguments during the
    trace raises. With `shapeless`, a new shape traces again (a recorded graph
    is kept per shape)."""
    _check_callable(fun, "compile")
    cache = {}
    # Calls whose arguments are arrays alone, positional, without implicit
    # inputs or outputs (an activation, a block of a model) skip the tree walks
    # that make up most of a call's cost: their entry is found by their count.
    by_count = {}
    plain = inputs is None and outputs is None

    @functools.wraps(fun, updated=())
    def compiled(*args, **kwargs):
        if not _core._compile_enabled():
            return fun(*args, **kwargs)
        count_key = None
        if plain and not kwargs and all(type(a) is array for a in args):
            count_key = len(args)
            entry = by_count.get(count_key)
            if entry is not None:
                results = entry["fn"](list(args))
                out_template, out_structure, out_idx = entry["result"]
                if out_structure is None:  # one leaf
                    return results[0] if out_idx else out_template[0]
                return _rebuild(out_template, out_structure, out_idx, results)
        leaves, structure, idx = _split_arrays((args, kwargs))
        explicit = [leaves[i] for i in idx]
        in_slots = _array_slots(inputs)
        state = [c[k] for c, k in in_slots]
        constants = [leaf for leaf in leaves if not isinstance(leaf, array)]
        key = (_structure_key(structure), tuple(idx),
               tuple(_constant_key(leaf) for leaf in constants),
               tuple((id(c), k) for c, k in in_slots))
        entry = cache.get(key)
        if entry is None:
            template = [None if isinstance(leaf, array) else leaf for leaf in leaves]
            entry = {}

            def flat(xs):
                for (c, k), x in zip(in_slots, xs[len(idx):]):
                    c[k] = x
                a, kw = _rebuild(template, structure, idx, xs[:len(idx)])
                out_leaves, out_structure, out_idx = _split_arrays(fun(*a, **kw))
                entry["result"] = ([None if isinstance(leaf, array) else leaf
                                    for leaf in out_leaves], out_structure, out_idx)
                return [out_leaves[i] for i in out_idx] + [c[k] for c, k in _array_slots(outputs)]

            entry["fn"] = _core._compile_flat(flat, shapeless)
            cache[key] = entry
        if count_key is not None:
            by_count[count_key] = entry
        try:
            results = entry["fn"](explicit + state)
        finally:
            # A trace leaves placeholders in the implicit inputs' containers.
            for (c, k), x in zip(in_slots, state):
                c[k] = x
        out_template, out_structure, out_idx = entry["result"]
        count = len(out_idx)
        out_slots = _array_slots(outputs)
        if len(out_slots) != len(results) - count:
            raise ValueError(
                f"[compile] the implicit outputs hold {len(out_slots)} arrays, the trace "
                f"recorded {len(results) - count}")
        for (c, k), x in zip(out_slots, results[count:]):
            c[k] = x
        return _rebuild(out_template, out_structure, out_idx, results[:count])

    return compiled


@contextlib.contextmanager
def printoptions(precision=None):
    """Sets the print options within a with-block and restores them after it."""
    old = _core.get_printoptions().precision
    _core.set_printoptions(precision)
    try:
        yield
    finally:
        _core.set_printoptions(old)


def install(module):
    for name in ("grad", "value_and_grad", "vjp", "jvp", "vmap", "checkpoint",
                 "custom_function", "compile", "printoptions"):
        setattr(module, name, globals()[name])
    module.random.state = _RandomState()
