"""tessera.utils tree helpers on nested pytrees."""

from collections import namedtuple

import numpy as np
import pytest

import tessera.core as mx
from tessera.utils import (tree_flatten, tree_map, tree_map_with_path, tree_merge,
                           tree_reduce, tree_unflatten)

Point = namedtuple("Point", ["x", "y"])


def nested():
    return {"a": [1, 2, (3, 4)], "b": {"c": 5, "d": [6]}, "e": 7}


def test_tree_map_keeps_structure_and_maps_leaves():
    out = tree_map(lambda v: v * 10, nested())
    assert out == {"a": [10, 20, (30, 40)], "b": {"c": 50, "d": [60]}, "e": 70}
    assert isinstance(out["a"], list) and isinstance(out["a"][2], tuple)


def test_tree_map_with_rest_trees_and_arrays():
    a = {"w": mx.array([1.0, 2.0]), "l": [mx.array(3.0)]}
    b = {"w": mx.array([10.0, 20.0]), "l": [mx.array(30.0)]}
    out = tree_map(lambda x, y: x + y, a, b)
    np.testing.assert_array_equal(np.array(out["w"]), [11.0, 22.0])
    np.testing.assert_array_equal(np.array(out["l"][0]), 33.0)


def test_tree_map_rest_may_be_deeper_and_is_leaf_stops():
    out = tree_map(lambda x, y: (x, y), {"a": 1}, {"a": [1, 2]})
    assert out == {"a": (1, [1, 2])}
    out = tree_map(lambda t: sum(t), {"a": [1, 2], "b": [3]},
                   is_leaf=lambda n: isinstance(n, list))
    assert out == {"a": 3, "b": 3}


def test_tree_map_rebuilds_namedtuples():
    out = tree_map(lambda v: v + 1, Point(1, [2]))
    assert isinstance(out, Point) and out == Point(2, [3])


def test_tree_map_with_path_gives_dotted_paths():
    paths = []
    tree_map_with_path(lambda p, v: paths.append((p, v)), nested())
    assert paths == [("a.0", 1), ("a.1", 2), ("a.2.0", 3), ("a.2.1", 4), ("b.c", 5),
                     ("b.d.0", 6), ("e", 7)]
    out = tree_map_with_path(lambda p, v, w: f"{p}:{v + w}", {"x": [1]}, {"x": [2]},
                             path="root")
    assert out == {"x": ["root.x.0:3"]}


def test_tree_flatten_order_prefix_and_destination():
    flat = tree_flatten(nested())
    assert flat == [("a.0", 1), ("a.1", 2), ("a.2.0", 3), ("a.2.1", 4), ("b.c", 5),
                    ("b.d.0", 6), ("e", 7)]
    assert tree_flatten({"w": 1}, prefix=".model") == [("model.w", 1)]
    assert tree_flatten(5) == [("", 5)]
    d = tree_flatten({"a": [1, 2]}, destination={})
    assert d == {"a.0": 1, "a.1": 2}
    assert tree_flatten({"a": [1, 2], "b": 3}, is_leaf=lambda n: isinstance(n, list)) == [
        ("a", [1, 2]), ("b", 3)]


def test_tree_unflatten_inverts_flatten():
    tree = {"a": [1, 2, [3, 4]], "b": {"c": 5, "d": [6]}, "e": 7}
    assert tree_unflatten(tree_flatten(tree)) == tree
    assert tree_unflatten(dict(tree_flatten(tree))) == tree
    assert tree_unflatten([("", 9)]) == 9
    # Gaps in integer levels are filled with empty dicts.
    assert tree_unflatten([("0", 1), ("2", 3)]) == [1, {}, 3]
    assert tree_unflatten([("layers.1.w", 1)]) == {"layers": [{}, {"w": 1}]}


def test_tree_reduce():
    assert tree_reduce(lambda acc, v: acc + v, nested(), 0) == 28
    assert tree_reduce(lambda acc, v: acc * v, {"a": [2, 3], "b": 4}) == 24
    assert tree_reduce(lambda acc, v: acc + v, {"a": [1, 2], "b": [3]}, [],
                       is_leaf=lambda n: isinstance(n, list)) == [1, 2, 3]
    arrays = {"x": mx.array([1.0, 2.0]), "y": [mx.array([3.0])]}
    total = tree_reduce(lambda acc, v: acc + mx.sum(v), arrays, 0.0)
    assert total.item() == 6.0


def test_tree_merge():
    a = {"x": [1, {}], "y": {"z": 2}}
    b = {"x": [{}, 3], "w": 4}
    assert tree_merge(a, b) == {"x": [1, 3], "y": {"z": 2}, "w": 4}
    assert tree_merge({}, {"a": 1}) == {"a": 1}
    assert tree_merge({"a": 1}, {"a": 2}, merge_fn=lambda u, v: u + v) == {"a": 3}
    with pytest.raises(ValueError):
        tree_merge({"a": 1}, {"a": 2})
