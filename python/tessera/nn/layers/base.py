"""``nn.Module``: a dict of parameters and sub-modules."""

import textwrap
from typing import Any, Callable, List, Optional, Tuple, Union

import tessera.core as mx
from tessera.utils import tree_flatten, tree_unflatten


def _int_tuple(cls, name, value, n):
    """`value` (an int or n ints) as a tuple of n ints."""
    if isinstance(value, int):
        return (value,) * n
    value = tuple(value)
    if len(value) != n or not all(isinstance(v, int) for v in value):
        raise ValueError(f"[{cls}] {name} must be an int or {n} ints, got {value}")
    return value


def _unwrap(model, value_key, value, filter_fn, map_fn, is_leaf_fn):
    if is_leaf_fn(model, value_key, value):
        return map_fn(value)

    if isinstance(value, Module):
        return {
            k: _unwrap(value, k, v, filter_fn, map_fn, is_leaf_fn)
            for k, v in value.items()
            if filter_fn(value, k, v)
        }
    if isinstance(value, dict):
        nd = {}
        for k, v in value.items():
            tk = f"{value_key}.{k}"
            nd[k] = (_unwrap(model, tk, v, filter_fn, map_fn, is_leaf_fn)
                     if filter_fn(model, tk, v) else {})
        return nd
    if isinstance(value, list):
        nl = []
        for i, vi in enumerate(value):
            tk = f"{value_key}.{i}"
            nl.append(_unwrap(model, tk, vi, filter_fn, map_fn, is_leaf_fn)
                      if filter_fn(model, tk, vi) else {})
        return nl
    raise RuntimeError("[Module] unexpected leaf found while traversing the module")


def _update_tree(tree, src, choose, op, what, strict):
    """Walks the dicts and lists of ``src`` in step with those of ``tree``. At
    each entry both hold, ``choose(current, new, where)`` answers "set" (the
    entry of tree becomes new), "walk" (the walk goes into both) or None (the
    entry is left). With ``strict``, an entry of src that tree lacks, or a src
    that is neither a dict nor a list, raises ValueError naming ``op``; ``what``
    names the entries of tree in the message."""

    def visit(dst, key, new_value, where):
        action = choose(dst[key], new_value, where)
        if action == "set":
            dst[key] = new_value
        elif action == "walk":
            walk(dst[key], new_value, where)

    def walk(dst, src, path=""):
        if isinstance(src, dict):
            for k in src:
                where = f"{path}.{k}" if path else str(k)
                if k in dst:
                    visit(dst, k, src[k], where)
                elif strict:
                    raise ValueError(f"[{op}] module has no {what} named {where!r}")
        elif isinstance(src, list):
            for i in range(len(src)):
                where = f"{path}.{i}"
                if i < len(dst):
                    visit(dst, i, src[i], where)
                elif strict:
                    raise ValueError(f"[{op}] index {i} of {path!r} is out of range "
                                     f"for a list of {len(dst)} entries")
        elif strict:
            raise ValueError(f"[{op}] received an invalid type {type(src).__name__} "
                             f"at {path!r}")

    walk(tree, src)


class Module(dict):
    """Base class of layers and models.

    Arrays, dicts, lists and tuples assigned as attributes are stored as dict
    entries (the parameter tree); everything else is a plain attribute.
    """

    __call__: Callable

    def __init__(self):
        self._no_grad = set()
        self._training = True

    @property
    def training(self):
        """True in training mode."""
        return self._training

    @property
    def state(self):
        """The module's entries (itself)."""
        return self

    def _extra_repr(self):
        return ""

    def __repr__(self):
        children = tree_flatten(self.children(), is_leaf=self.is_module)
        value = f"{type(self).__name__}({self._extra_repr()}"
        for k, v in children:
            value += "\n" + textwrap.indent(f"({k}): {repr(v)}", prefix="  ")
        if children:
            value += "\n"
        return value + ")"

    def __getattr__(self, key: str):
        if key in self:
            return self[key]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {key!r}")

    def __setattr__(self, key: str, val: Any):
        if isinstance(val, (mx.array, dict, list, tuple)):
            if hasattr(self, key) and key not in self:
                delattr(self, key)
            self[key] = val
        else:
            super().__setattr__(key, val)
            self.pop(key, None)

    def __delattr__(self, name):
        if name in self:
            del self[name]
        else:
            super().__delattr__(name)

    # Modules compare and hash by identity, like objects, not like dicts.
    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    # ---- weights on disk ---------------------------------------------------

    def load_weights(self, file_or_weights: Union[str, List[Tuple[str, mx.array]]],
                     strict: bool = True) -> "Module":
        """Loads weights from a ``.npz`` / ``.safetensors`` file or a list of
        ``(dotted_name, array)`` pairs. ``strict`` requires exactly the model's
        parameter names with identical shapes."""
        weights = file_or_weights
        if isinstance(weights, str):
            weights = list(_load_file(weights).items())

        if strict:
            new_weights = dict(weights)
            curr_weights = dict(tree_flatten(self.parameters()))
            extras = new_weights.keys() - curr_weights.keys()
            if extras:
                raise ValueError(f"[load_weights] received parameters not in the model: "
                                 f"{', '.join(sorted(extras))}")
            missing = curr_weights.keys() - new_weights.keys()
            if missing:
                raise ValueError(f"[load_weights] missing parameters: "
                                 f"{', '.join(sorted(missing))}")
            for k, v in curr_weights.items():
                v_new = new_weights[k]
                if not isinstance(v_new, mx.array):
                    raise ValueError(f"[load_weights] expected an array for {k!r} but got "
                                     f"{type(v_new).__name__}")
                if v_new.shape != v.shape:
                    raise ValueError(f"[load_weights] expected shape {v.shape} for {k!r} "
                                     f"but received shape {v_new.shape}")

        if len(weights) != 0:
            self.update(tree_unflatten(weights), strict=False)
        return self

    def save_weights(self, file: str):
        """Saves the flattened parameters to ``.npz`` or ``.safetensors``."""
        params = dict(tree_flatten(self.parameters()))
        if file.endswith(".npz"):
            mx.savez(file, **params)
        elif file.endswith(".safetensors"):
            mx.save_safetensors(file, params)
        else:
            raise ValueError(f"[save_weights] unsupported file extension of {file!r}; "
                             "use .npz or .safetensors")

    # ---- filters -----------------------------------------------------------

    @staticmethod
    def is_module(value):
        return isinstance(value, Module)

    @staticmethod
    def valid_child_filter(module, key, value):
        return isinstance(value, (dict, list))

    @staticmethod
    def valid_parameter_filter(module, key, value):
        return isinstance(value, (dict, list, mx.array)) and not key.startswith("_")

    @staticmethod
    def trainable_parameter_filter(module, key, value):
        return (Module.valid_parameter_filter(module, key, value)
                and key not in module._no_grad)

    def filter_and_map(self, filter_fn: Callable[["Module", str, Any], bool],
                       map_fn: Optional[Callable] = None,
                       is_leaf_fn: Optional[Callable[["Module", str, Any], bool]] = None) -> dict:
        """Recursively selects the entries for which ``filter_fn`` holds and maps
        the leaves through ``map_fn``."""
        map_fn = map_fn or (lambda x: x)
        is_leaf_fn = is_leaf_fn or (
            lambda m, k, v: not isinstance(v, (Module, dict, list)))
        return {
            k: _unwrap(self, k, v, filter_fn, map_fn, is_leaf_fn)
            for k, v in self.items()
            if filter_fn(self, k, v)
        }

    def parameters(self) -> dict:
        """All arrays of the module and its sub-modules, as a nested dict."""
        return self.filter_and_map(self.valid_parameter_filter)

    def trainable_parameters(self) -> dict:
        """The parameters that are not frozen."""
        return self.filter_and_map(self.trainable_parameter_filter)

    def children(self) -> dict:
        """Direct sub-modules (possibly inside lists and dicts)."""
        return self.filter_and_map(
            self.valid_child_filter,
            is_leaf_fn=lambda m, k, v: isinstance(v, Module))

    def leaf_modules(self) -> dict:
        """Sub-modules that have no children."""

        def _is_leaf_module(m, k, v):
            return isinstance(v, Module) and len(tree_flatten(v.children())) == 0

        return self.filter_and_map(self.valid_child_filter, is_leaf_fn=_is_leaf_module)

    # ---- updates -----------------------------------------------------------

    def update(self, parameters: dict, strict: bool = True) -> "Module":
        """Replaces the arrays at the (possibly partial) locations of ``parameters``."""

        def choose(current_value, new_value, where):
            # An array replaces an array; containers are walked into.
            if not isinstance(current_value, mx.array):
                return "walk"
            if strict and not isinstance(new_value, mx.array):
                raise ValueError(f"[update] received a non-array value for {where!r}")
            return "set"

        _update_tree(self, parameters, choose, "update", "parameter", strict)
        return self

    def apply(self, map_fn: Callable[[mx.array], mx.array],
              filter_fn: Optional[Callable[["Module", str, Any], bool]] = None) -> "Module":
        """Maps the parameters selected by ``filter_fn`` through ``map_fn``."""
        filter_fn = filter_fn or Module.valid_parameter_filter
        self.update(self.filter_and_map(filter_fn, map_fn))
        return self

    def update_modules(self, modules: dict, strict: bool = True) -> "Module":
        """Replaces the sub-modules at the locations of ``modules``."""

        def choose(current_value, new_value, where):
            # A module replaces a module; containers are walked into.
            if self.is_module(current_value) and self.is_module(new_value):
                return "set"
            if isinstance(current_value, (dict, list)):
                return "walk"
            if strict and new_value != {}:
                raise ValueError(f"[update_modules] received an invalid value for {where!r}")
            return None

        _update_tree(self, modules, choose, "update_modules", "sub-module", strict)
        return self

    def apply_to_modules(self, apply_fn: Callable[[str, "Module"], Any]) -> "Module":
        """Calls ``apply_fn(path, module)`` for this module and every descendant."""
        module_stack = [("", self)]
        while module_stack:
            prefix, mod = module_stack.pop()
            apply_fn(prefix, mod)
            prefix = "." + prefix if prefix else ""
            module_stack.extend(tree_flatten(mod.children(), prefix=prefix,
                                             is_leaf=self.is_module))
        return self

    def modules(self) -> list:
        """Every module of the tree, this one included."""
        modulelist = []
        self.apply_to_modules(lambda k, m: modulelist.append(m))
        return modulelist

    def named_modules(self) -> list:
        """``(dotted_path, module)`` for every module of the tree (``""`` for self)."""
        modulelist = []
        self.apply_to_modules(lambda k, m: modulelist.append((k, m)))
        return modulelist

    # ---- freezing ----------------------------------------------------------

    def _validate_keys(self, keys, strict):
        keys = keys if isinstance(keys, list) else [keys]
        if strict:
            for k in keys:
                if k not in self:
                    raise KeyError(f"[freeze] module {type(self).__name__} has no "
                                   f"parameter named {k!r}")
        return keys

    def freeze(self, *, recurse: bool = True, keys: Optional[Union[str, List[str]]] = None,
               strict: bool = False) -> "Module":
        """Marks parameters as not trainable (all local ones, or only ``keys``)."""

        def _freeze_impl(_, m):
            local_keys = keys
            if local_keys is None:
                local_keys = tree_flatten(
                    m.filter_and_map(
                        lambda m, k, v: (not isinstance(v, Module))
                        and m.valid_parameter_filter(m, k, v)))
                local_keys = [k for (k, v) in local_keys]
            local_keys = m._validate_keys(local_keys, strict)
            m._no_grad.update(local_keys)

        return self._apply_local(_freeze_impl, recurse)

    def unfreeze(self, *, recurse: bool = True, keys: Optional[Union[str, List[str]]] = None,
                 strict: bool = False) -> "Module":
        """Marks parameters as trainable again (no ``keys``: clears all freezes)."""

        def _unfreeze_impl(_, m):
            if keys is None:
                m._no_grad.clear()
            else:
                local_keys = m._validate_keys(keys, strict)
                m._no_grad.difference_update(local_keys)

        return self._apply_local(_unfreeze_impl, recurse)

    def _apply_local(self, fn, recurse: bool) -> "Module":
        """Calls ``fn(path, module)`` for this module and, with ``recurse``, its descendants."""
        if recurse:
            self.apply_to_modules(fn)
        else:
            fn("", self)
        return self

    # ---- modes and dtypes --------------------------------------------------

    def train(self, mode: bool = True) -> "Module":
        """Sets the training flag of this module and its descendants."""

        def _set_train(_, m):
            m._training = mode

        self.apply_to_modules(_set_train)
        return self

    def eval(self) -> "Module":
        """``train(False)``."""
        return self.train(False)

    def set_dtype(self, dtype: mx.Dtype,
                  predicate: Optional[Callable[[mx.Dtype], bool]] =
                  lambda x: mx.issubdtype(x, mx.floating)):
        """Casts the parameters whose dtype satisfies ``predicate`` (None: all)."""
        if predicate is None:
            def predicate(_):
                return True
        self.apply(lambda x: x.astype(dtype) if predicate(x.dtype) else x)


# ---- file formats -----------------------------------------------------------

def _load_file(file):
    if file.endswith(".npz") or file.endswith(".safetensors"):
        return mx.load(file)
    raise ValueError(f"[load_weights] unsupported file extension of {file!r}; "
                     "use .npz or .safetensors")
