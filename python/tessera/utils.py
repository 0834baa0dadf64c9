"""Tree helpers (MLX's ``mlx.utils``).

A tree is any nesting of ``list``, ``tuple`` and ``dict``; everything else is a
leaf. Paths of leaves are dotted strings such as ``"layers.0.weight"``.
"""

from collections import defaultdict
from itertools import zip_longest  # noqa: F401 (a name of mlx.utils)
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

__all__ = [
    "tree_map",
    "tree_map_with_path",
    "tree_flatten",
    "tree_unflatten",
    "tree_reduce",
    "tree_merge",
]


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _rebuild_tuple(tree, values):
    if _is_namedtuple(tree):
        return type(tree)(*values)
    return tuple(values)


def tree_map(fn: Callable, tree: Any, *rest: Any, is_leaf: Optional[Callable] = None) -> Any:
    """Applies ``fn`` to the leaves of ``tree`` and the matching nodes of ``rest``.

    The trees in ``rest`` must contain the structure of ``tree``; where ``tree`` has
    a leaf, the whole matching subtree of each of ``rest`` is passed to ``fn``.
    """
    if is_leaf is not None and is_leaf(tree):
        return fn(tree, *rest)
    if isinstance(tree, (list, tuple)):
        values = [
            tree_map(fn, child, *(r[i] for r in rest), is_leaf=is_leaf)
            for i, child in enumerate(tree)
        ]
        return values if isinstance(tree, list) else _rebuild_tuple(tree, values)
    if isinstance(tree, dict):
        return {
            k: tree_map(fn, child, *(r[k] for r in rest), is_leaf=is_leaf)
            for k, child in tree.items()
        }
    return fn(tree, *rest)


def tree_map_with_path(
    fn: Callable,
    tree: Any,
    *rest: Any,
    is_leaf: Optional[Callable] = None,
    path: Optional[str] = None,
) -> Any:
    """Like :func:`tree_map`, calling ``fn(path, leaf, *rest_leaves)``."""

    def join(k):
        return str(k) if path is None else f"{path}.{k}"

    if is_leaf is not None and is_leaf(tree):
        return fn(path, tree, *rest)
    if isinstance(tree, (list, tuple)):
        values = [
            tree_map_with_path(fn, child, *(r[i] for r in rest), is_leaf=is_leaf, path=join(i))
            for i, child in enumerate(tree)
        ]
        return values if isinstance(tree, list) else _rebuild_tuple(tree, values)
    if isinstance(tree, dict):
        return {
            k: tree_map_with_path(fn, child, *(r[k] for r in rest), is_leaf=is_leaf, path=join(k))
            for k, child in tree.items()
        }
    return fn(path, tree, *rest)


def tree_flatten(
    tree: Any,
    prefix: str = "",
    is_leaf: Optional[Callable] = None,
    destination: Optional[Union[List[Tuple[str, Any]], Dict[str, Any]]] = None,
) -> Union[List[Tuple[str, Any]], Dict[str, Any]]:
    """Flattens a tree into ``(dotted_key, leaf)`` pairs in traversal order.

    Keys are ``prefix + "." + path`` with the first character dropped, so a prefix
    such as ``".model"`` gives keys ``"model.weight"``. With ``destination`` a dict,
    the pairs are written into it and it is returned.
    """
    if destination is None:
        destination = []
    add = destination.__setitem__ if isinstance(destination, dict) else (
        lambda k, v: destination.append((k, v)))

    _flatten_keys(tree, prefix, is_leaf, add)
    return destination


def _flatten_keys(t, pre, is_leaf, add):
    # Module-level, not nested: a nested function that calls itself is a
    # reference cycle, and this one would hold the leaves until a collection.
    if (is_leaf is None or not is_leaf(t)) and isinstance(t, (list, tuple)):
        for i, child in enumerate(t):
            _flatten_keys(child, f"{pre}.{i}", is_leaf, add)
    elif (is_leaf is None or not is_leaf(t)) and isinstance(t, dict):
        for k, child in t.items():
            _flatten_keys(child, f"{pre}.{k}", is_leaf, add)
    else:
        add(pre[1:], t)


def tree_unflatten(tree: Union[List[Tuple[str, Any]], Dict[str, Any]]) -> Any:
    """Inverse of :func:`tree_flatten`.

    Levels whose keys are all integers become lists (missing positions are filled
    with ``{}``); other levels become dicts. A single ``""`` key gives the leaf.
    """
    items = list(tree.items()) if isinstance(tree, dict) else list(tree)
    if len(items) == 1 and items[0][0] == "":
        return items[0][1]

    try:
        int(items[0][0].split(".", 1)[0])
        is_list = True
    except (ValueError, IndexError):
        is_list = False

    children = defaultdict(list)
    for key, value in items:
        current, *rest = key.split(".", 1)
        children[current].append((rest[0] if rest else "", value))

    if is_list:
        indexed = {int(k): tree_unflatten(v) for k, v in children.items()}
        size = max(indexed) + 1 if indexed else 0
        return [indexed.get(i, {}) for i in range(size)]
    return {k: tree_unflatten(v) for k, v in children.items()}


def tree_reduce(fn: Callable, tree: Any, initializer: Any = None,
                is_leaf: Optional[Callable] = None) -> Any:
    """Left fold of ``fn(acc, leaf)`` over the leaves of ``tree``.

    Without ``initializer`` the first leaf starts the fold.
    """
    if is_leaf is not None and is_leaf(tree):
        return tree if initializer is None else fn(initializer, tree)
    if isinstance(tree, (list, tuple)):
        children = tree
    elif isinstance(tree, dict):
        children = tree.values()
    else:
        return tree if initializer is None else fn(initializer, tree)
    acc = initializer
    for child in children:
        acc = tree_reduce(fn, child, acc, is_leaf)
    return acc


def tree_merge(tree_a: Any, tree_b: Any, merge_fn: Optional[Callable] = None) -> Any:
    """Deep union of two trees; empty containers count as absent.

    Where both trees hold a leaf at the same place, ``merge_fn(a, b)`` decides;
    without it that is a ``ValueError``.
    """
    if isinstance(tree_a, (dict, list, tuple)) and len(tree_a) == 0:
        tree_a = None
    if isinstance(tree_b, (dict, list, tuple)) and len(tree_b) == 0:
        tree_b = None
    if tree_a is None:
        return tree_b
    if tree_b is None:
        return tree_a

    if isinstance(tree_a, (list, tuple)) and isinstance(tree_b, (list, tuple)):
        n = max(len(tree_a), len(tree_b))
        values = [
            tree_merge(tree_a[i] if i < len(tree_a) else None,
                       tree_b[i] if i < len(tree_b) else None, merge_fn)
            for i in range(n)
        ]
        return values if isinstance(tree_a, list) else _rebuild_tuple(tree_a, values)
    if isinstance(tree_a, dict) and isinstance(tree_b, dict):
        keys = list(tree_a) + [k for k in tree_b if k not in tree_a]
        return {k: tree_merge(tree_a.get(k), tree_b.get(k), merge_fn) for k in keys}
    if isinstance(tree_a, (dict, list, tuple)) or isinstance(tree_b, (dict, list, tuple)):
        raise ValueError(
            f"[tree_merge] cannot merge a {type(tree_a).__name__} with a {type(tree_b).__name__}")
    if merge_fn is None:
        raise ValueError(
            "[tree_merge] both trees have a leaf at the same place; pass merge_fn to choose")
    return merge_fn(tree_a, tree_b)
