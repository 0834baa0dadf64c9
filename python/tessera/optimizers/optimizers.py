"""Optimizers."""

import math
from typing import Callable, List, Optional, Tuple, Union

import tessera.core as mx
from tessera.utils import tree_flatten, tree_map, tree_merge, tree_reduce, tree_unflatten


def _check_tree(optimizer, gradients, parameters, path):
    """Every entry of ``gradients`` must be one of ``parameters``: ValueError
    naming the first that is not, before any state changes. A part of the
    gradients that holds no array (an empty dict or list where the model keeps
    other attributes) updates nothing and is not checked."""
    if not tree_flatten(gradients):
        return
    if isinstance(gradients, dict):
        if not isinstance(parameters, dict):
            raise ValueError(f"[{optimizer}.update] the gradients have a dict at "
                             f"'{path}' where the parameters have {type(parameters).__name__}")
        for k, g in gradients.items():
            if k not in parameters:
                raise ValueError(f"[{optimizer}.update] the gradients have '{path}{k}', "
                                 f"which the parameters do not")
            _check_tree(optimizer, g, parameters[k], f"{path}{k}.")
    elif isinstance(gradients, (list, tuple)):
        if not isinstance(parameters, (list, tuple)) or len(parameters) < len(gradients):
            raise ValueError(f"[{optimizer}.update] the gradients have a list of "
                             f"{len(gradients)} at '{path}' that the parameters do not match")
        for i, g in enumerate(gradients):
            _check_tree(optimizer, g, parameters[i], f"{path}{i}.")


class Optimizer:
    """Base class: subclasses implement ``init_single`` and ``apply_single``."""

    def __init__(self, schedulers=None):
        self._initialized = False
        self._state = {"step": mx.array(0, mx.uint64)}
        self._schedulers = {k: v for k, v in (schedulers or {}).items()}

    def update(self, model, gradients: dict):
        """``model.update(apply_gradients(gradients, model))``."""
        model.update(self.apply_gradients(gradients, model))

    def init(self, parameters: dict):
        """Builds the state of every parameter that has none yet."""

        # Entries of the state that mirror the parameter tree, created where missing.
        def update_state(params, state):
            if isinstance(params, (list, tuple)):
                state = list(state)
                for i in range(len(state)):
                    state[i] = update_state(params[i], state[i])
                if len(state) != len(params):
                    state.extend(tree_map(lambda _: {}, params[len(state):]))
                return type(params)(state)
            if isinstance(params, dict):
                for k, v in params.items():
                    if k not in state:
                        state[k] = tree_map(lambda _: {}, v)
                    else:
                        state[k] = update_state(v, state[k])
                return state
            return state

        update_state(parameters, self._state)
        tree_map(lambda p, s: s or self.init_single(p, s), parameters, self._state)
        self._initialized = True

    # The state of each parameter that starts as zeros like it; an optimizer
    # with other state overrides init_single.
    zero_state: Tuple[str, ...] = ()

    def init_single(self, parameter, state: dict):
        for name in self.zero_state:
            state[name] = mx.zeros_like(parameter)

    def _require_non_negative(self, **values):
        """Raises ValueError, naming the optimizer, for a negative hyper-parameter."""
        for name, value in values.items():
            if value < 0.0:
                raise ValueError(f"[{type(self).__name__}] {name} must be non-negative "
                                 f"but is {value}")

    def apply_gradients(self, gradients: dict, parameters: dict):
        """Updated parameters with the structure of ``gradients``."""
        _check_tree(type(self).__name__, gradients, parameters, "")
        if not self._initialized:
            self.init(gradients)

        # Scheduled hyper-parameters at the current step, then the step advances.
        for param, scheduler in self._schedulers.items():
            self.state[param] = scheduler(self.step)
        self.state["step"] = self.step + 1

        return tree_map(self.apply_single, gradients, parameters, self.state)

    def apply_single(self, gradient, parameter, state):
        raise NotImplementedError()

    @property
    def state(self):
        """The optimizer's state dict."""
        return self._state

    @state.setter
    def state(self, state: dict):
        self._initialized = False
        self._state = state

    @property
    def step(self):
        return self.state["step"]

    @property
    def learning_rate(self):
        return self.state["learning_rate"]

    @learning_rate.setter
    def learning_rate(self, learning_rate: Union[float, mx.array]):
        self.state["learning_rate"] = mx.array(learning_rate)

    def _maybe_schedule(self, name: str, param: Union[float, Callable]):
        """Stores ``param`` in the state, or registers it as a schedule."""
        if isinstance(param, Callable):
            self._schedulers[name] = param
            parameter = param(self.step)
        else:
            try:
                parameter = mx.array(param)
            except (TypeError, ValueError):
                raise ValueError(f"[{type(self).__name__}] {name} must be a number, an array or "
                                 f"a schedule, got {param!r}") from None
        self.state[name] = parameter


class MultiOptimizer(Optimizer):
    """Sends each gradient to the first optimizer whose filter accepts it; the last
    optimizer takes the rest."""

    def __init__(self, optimizers, filters: list = []):
        super().__init__()
        self._state = {}
        if len(filters) != len(optimizers) - 1:
            raise ValueError(f"[MultiOptimizer] {len(filters)} filters were given for "
                             f"{len(optimizers)} optimizers; {len(optimizers) - 1} needed")
        self.optimizers = optimizers
        self.filters = list(filters) + [lambda *args, **kwargs: True]

    def _split_dictionary(self, gradients: dict):
        if len(self.optimizers) == 1:
            return [gradients]
        parts = [[] for _ in range(len(self.optimizers))]
        flat_gradients = tree_flatten(gradients)
        for k, g in flat_gradients:
            for i, fn in enumerate(self.filters):
                if fn(k, g):
                    parts[i].append((k, g))
                    break
        return [tree_unflatten(p) if p else {} for p in parts]

    def init(self, parameters: dict):
        for o, p in zip(self.optimizers, self._split_dictionary(parameters)):
            o.init(p)

    def apply_gradients(self, gradients: dict, parameters: dict):
        tree = {}
        for o, g in zip(self.optimizers, self._split_dictionary(gradients)):
            tree = tree_merge(tree, o.apply_gradients(g, parameters))
        return tree

    @property
    def state(self):
        return {"states": [o.state for o in self.optimizers]}

    @state.setter
    def state(self, state: dict):
        if "states" not in state or len(state["states"]) != len(self.optimizers):
            raise ValueError(f"[MultiOptimizer] the state must hold one state per optimizer "
                             f"({len(self.optimizers)})")
        for o, s in zip(self.optimizers, state["states"]):
            o.state = s

    @property
    def learning_rate(self):
        return self.optimizers[0].learning_rate

    @learning_rate.setter
    def learning_rate(self, learning_rate):
        for o in self.optimizers:
            o.learning_rate = learning_rate


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, weight decay, dampening, Nesterov."""

    zero_state = ("v",)

    def __init__(self, learning_rate: Union[float, Callable], momentum: float = 0.0,
                 weight_decay: float = 0.0, dampening: float = 0.0, nesterov: bool = False):
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("[SGD] nesterov momentum requires a momentum and zero dampening, "
                             f"got momentum={momentum}, dampening={dampening}")
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.dampening = dampening
        self.nesterov = nesterov

    def apply_single(self, gradient, parameter, state: dict):
        if self.weight_decay != 0:
            gradient = gradient + self.weight_decay * parameter

        lr = self.learning_rate.astype(gradient.dtype)
        if self.momentum <= 0:
            return parameter - lr * gradient

        v = self.momentum * state.get("v")
        if self.dampening > 0:
            v = v + (1 - self.dampening) * gradient
        else:
            v = v + gradient

        if self.nesterov:
            update = gradient + self.momentum * v
        else:
            update = v
        state["v"] = v
        return parameter - lr * update


class RMSprop(Optimizer):
    """v <- alpha v + (1 - alpha) g^2; p - lr g / (sqrt(v) + eps)."""

    zero_state = ("v",)

    def __init__(self, learning_rate: Union[float, Callable], alpha: float = 0.99,
                 eps: float = 1e-8):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.alpha = alpha
        self.eps = eps
        self._require_non_negative(alpha=alpha)
        if self.eps <= 0.0:
            raise ValueError(f"[RMSprop] eps must be positive but is {self.eps}")

    def apply_single(self, gradient, parameter, state: dict):
        lr = self.learning_rate.astype(gradient.dtype)
        alpha = self.alpha
        eps = self.eps
        v = state["v"]
        v = alpha * v + (1 - alpha) * mx.square(gradient)
        state["v"] = v
        return parameter - lr * gradient / (mx.sqrt(v) + eps)


class Adagrad(Optimizer):
    """v <- v + g^2; p - lr g / (sqrt(v) + eps)."""

    zero_state = ("v",)

    def __init__(self, learning_rate: Union[float, Callable], eps: float = 1e-8):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.eps = eps
        self._require_non_negative(eps=eps)

    def apply_single(self, gradient, parameter, state: dict):
        lr = self.learning_rate.astype(gradient.dtype)
        v = state["v"] + mx.square(gradient)
        state["v"] = v
        return parameter - lr * gradient / (mx.sqrt(v) + self.eps)


class AdaDelta(Optimizer):
    """AdaDelta with decay ``rho``."""

    zero_state = ("v", "u")

    def __init__(self, learning_rate: Union[float, Callable], rho: float = 0.9,
                 eps: float = 1e-6):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.rho = rho
        self.eps = eps
        self._require_non_negative(rho=rho, eps=eps)

    def apply_single(self, gradient, parameter, state: dict):
        lr = self.learning_rate.astype(gradient.dtype)
        rho = self.rho
        eps = self.eps
        v = state["v"]
        u = state["u"]
        v = rho * v + (1 - rho) * mx.square(gradient)
        d = mx.sqrt(u + eps) / mx.sqrt(v + eps) * gradient
        u = rho * u + (1 - rho) * mx.square(d)
        state["v"] = v
        state["u"] = u
        return parameter - lr * d


class Adam(Optimizer):
    """Adam, with optional bias correction."""

    zero_state = ("m", "v")

    def __init__(self, learning_rate: Union[float, Callable], betas: List[float] = [0.9, 0.999],
                 eps: float = 1e-8, bias_correction: bool = False):
        super().__init__()
        for b in betas:
            if not 0.0 <= b < 1.0:
                raise ValueError(f"[{type(self).__name__}] betas must be in [0, 1) but are "
                                 f"{list(betas)}")
        self._require_non_negative(eps=eps)
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas = betas
        self.eps = eps
        self.bias_correction = bias_correction

    def apply_single(self, gradient, parameter, state: dict):
        lr = self.learning_rate.astype(gradient.dtype)
        b1, b2 = self.betas
        eps = self.eps
        bias_correction = self.bias_correction
        step = self.step

        m = state["m"]
        v = state["v"]
        m = b1 * m + (1 - b1) * gradient
        v = b2 * v + (1 - b2) * mx.square(gradient)
        state["m"] = m
        state["v"] = v

        if bias_correction:
            t = step.astype(mx.float32)
            c1 = (lr / (1 - mx.power(b1, t))).astype(gradient.dtype)
            c2 = mx.rsqrt(1 - mx.power(b2, t)).astype(gradient.dtype)
            numerator = c1 * m
            denominator = mx.sqrt(v) * c2 + eps
            return parameter - numerator / denominator
        return parameter - lr * m / (mx.sqrt(v) + eps)


class AdamW(Adam):
    """Adam with decoupled weight decay: p <- p (1 - lr wd), then the Adam step."""

    def __init__(self, learning_rate: Union[float, Callable], betas: List[float] = [0.9, 0.999],
                 eps: float = 1e-8, weight_decay: float = 0.01, bias_correction: bool = False):
        super().__init__(learning_rate=learning_rate, betas=betas, eps=eps,
                         bias_correction=bias_correction)
        self.weight_decay = weight_decay

    def apply_single(self, gradient, parameter, state: dict):
        lr = self.learning_rate.astype(gradient.dtype)
        return super().apply_single(gradient, parameter * (1 - lr * self.weight_decay), state)


class Adamax(Adam):
    """m <- b1 m + (1 - b1) g; v <- max(b2 v, |g|); p - lr m / (v + eps)."""

    def __init__(self, learning_rate: Union[float, Callable], betas: List[float] = [0.9, 0.999],
                 eps: float = 1e-8):
        super().__init__(learning_rate, betas, eps)

    def apply_single(self, gradient, parameter, state: dict):
        lr = self.learning_rate.astype(gradient.dtype)
        b1, b2 = self.betas
        eps = self.eps
        m = state["m"]
        v = state["v"]
        m = b1 * m + (1 - b1) * gradient
        v = mx.maximum(b2 * v, mx.abs(gradient))
        state["m"] = m
        state["v"] = v
        return parameter - lr * m / (v + eps)


class Lion(Optimizer):
    """c = b1 m + (1 - b1) g; m <- b2 m + (1 - b2) g; p (1 - lr wd) - lr sign(c)."""

    zero_state = ("m",)

    def __init__(self, learning_rate: Union[float, Callable], betas: List[float] = [0.9, 0.99],
                 weight_decay: float = 0.0):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas = betas
        self.weight_decay = weight_decay

    def apply_single(self, gradient, parameter, state: dict):
        lr = self.learning_rate.astype(gradient.dtype)
        b1, b2 = self.betas
        weight_decay = self.weight_decay
        m = state["m"]
        c = b1 * m + (1 - b1) * gradient
        state["m"] = b2 * m + (1 - b2) * gradient
        if weight_decay > 0:
            parameter = (1 - lr * weight_decay) * parameter
        return parameter - lr * mx.sign(c)


class Adafactor(Optimizer):
    """Adafactor: factored second moments for parameters of 2 or more dims."""

    def __init__(self, learning_rate: Union[float, Callable, None] = None,
                 eps: Tuple[float, float] = (1e-30, 1e-3), clip_threshold: float = 1.0,
                 decay_rate: float = -0.8, beta_1: Optional[float] = None,
                 weight_decay: float = 0.0, scale_parameter: bool = True,
                 relative_step: bool = True, warmup_init: bool = False):
        super().__init__()
        if learning_rate is not None:
            self._maybe_schedule("learning_rate", learning_rate)
        self.eps = eps
        self.clip_threshold = clip_threshold
        self.decay_rate = decay_rate
        self.beta_1 = beta_1
        self.weight_decay = weight_decay
        self.scale_parameter = scale_parameter
        self.relative_step = relative_step
        self.warmup_init = warmup_init

    def init_single(self, parameter, state: dict):
        if parameter.ndim >= 2:
            shape = parameter.shape
            dtype = parameter.dtype
            state["exp_avg_sq_row"] = mx.zeros(shape[:-1], dtype=dtype)
            state["exp_avg_sq_col"] = mx.zeros(shape[:-2] + shape[-1:], dtype=dtype)
        else:
            state["exp_avg_sq"] = mx.zeros_like(parameter)
        if self.beta_1 is not None:
            state["exp_avg"] = mx.zeros_like(parameter)

    def _compute_rms(self, inputs):
        return mx.sqrt(mx.mean(mx.square(inputs)))

    def _compute_learning_rate(self, step, parameter_rms):
        if self.relative_step:
            min_step = 1e-6 * step if self.warmup_init else 1e-2
            relative_step_size = mx.minimum(min_step, mx.rsqrt(step))
        else:
            relative_step_size = self.learning_rate
        relative_step_size = relative_step_size.astype(parameter_rms.dtype)
        parameter_scale = 1.0
        if self.scale_parameter:
            parameter_scale = mx.maximum(self.eps[1], parameter_rms)
        return parameter_scale * relative_step_size


    def apply_single(self, gradient, parameter, state: dict):
        factored = gradient.ndim >= 2
        step = self.step.astype(mx.float32)
        use_first_moment = self.beta_1 is not None

        parameter_rms = self._compute_rms(parameter)
        learning_rate = self._compute_learning_rate(step, parameter_rms)
        beta_2 = 1.0 - mx.power(step, self.decay_rate).astype(parameter_rms.dtype)
        update = mx.square(gradient) + self.eps[0]

        if factored:
            exp_avg_sq_row = state["exp_avg_sq_row"]
            exp_avg_sq_col = state["exp_avg_sq_col"]
            exp_avg_sq_row = beta_2 * exp_avg_sq_row + (1 - beta_2) * mx.mean(update, axis=-1)
            exp_avg_sq_col = beta_2 * exp_avg_sq_col + (1 - beta_2) * mx.mean(update, axis=-2)
            state["exp_avg_sq_row"] = exp_avg_sq_row
            state["exp_avg_sq_col"] = exp_avg_sq_col
            r_factor = mx.rsqrt(exp_avg_sq_row
                                / mx.mean(exp_avg_sq_row, axis=-1, keepdims=True))
            c_factor = mx.rsqrt(exp_avg_sq_col)
            update = mx.expand_dims(r_factor, -1) * mx.expand_dims(c_factor, -2)
            update = update * gradient
        else:
            exp_avg_sq = state["exp_avg_sq"]
            exp_avg_sq = beta_2 * exp_avg_sq + (1 - beta_2) * update
            state["exp_avg_sq"] = exp_avg_sq
            update = mx.rsqrt(exp_avg_sq) * gradient

        update = update / mx.maximum(1.0, self._compute_rms(update) / self.clip_threshold)
        update = learning_rate * update

        if use_first_moment:
            exp_avg = state["exp_avg"]
            exp_avg = self.beta_1 * exp_avg + (1 - self.beta_1) * update
            state["exp_avg"] = exp_avg
            update = exp_avg

        if self.weight_decay != 0:
            parameter = parameter + parameter * (-self.weight_decay * learning_rate)
        return parameter - update


class Muon(Optimizer):
    """Momentum whose update of matrices is orthogonalised by Newton-Schulz steps."""

    zero_state = ("v",)

    def __init__(self, learning_rate: Union[float, Callable], momentum: float = 0.95,
                 weight_decay: float = 0.01, nesterov: bool = True, ns_steps: int = 5):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.nesterov = nesterov
        self.ns_steps = ns_steps

    def _zeropower_via_newtonschulz5(self, X, steps: int):
        a, b, c = (3.4445, -4.7750, 2.0315)
        transpose_needed = X.shape[-2] > X.shape[-1]
        if transpose_needed:
            X = X.T
        X = X / (mx.sqrt(mx.sum(mx.square(X))) + 1e-7)
        for _ in range(steps):
            A = X @ X.T
            B = b * A + c * (A @ A)
            X = a * X + B @ X
        if transpose_needed:
            X = X.T
        return X

    def apply_single(self, gradient, parameter, state: dict):
        if self.weight_decay != 0:
            gradient = gradient + self.weight_decay * parameter
        v = self.momentum * state["v"] + (1 - self.momentum) * gradient
        state["v"] = v
        if self.nesterov:
            update = gradient * (1 - self.momentum) + v * self.momentum
        else:
            update = v
        lr = self.learning_rate.astype(gradient.dtype)
        if update.ndim >= 2:
            original_shape = update.shape
            update = mx.reshape(update, (update.shape[0], -1))
            rows, cols = update.shape
            update = self._zeropower_via_newtonschulz5(update, steps=self.ns_steps)
            update = mx.reshape(update, original_shape)
            lr = lr * math.sqrt(max(1.0, rows / cols))
        return parameter - lr * update.astype(gradient.dtype)


def clip_grad_norm(grads, max_norm: float):
    """Scales every gradient by ``min(max_norm / (N + 1e-6), 1)`` where ``N`` is
    the global L2 norm; returns ``(clipped_grads, N)``."""
    if max_norm < 0:
        raise ValueError(f"[clip_grad_norm] max_norm must be non-negative but is {max_norm}")
    norm_squared = tree_reduce(lambda acc, g: acc + mx.sum(mx.square(g)), grads, 0.0)
    total_norm = mx.sqrt(norm_squared)
    normalizer = mx.minimum(max_norm / (total_norm + 1e-6), 1.0)
    clipped_grads = tree_map(lambda g: g * normalizer.astype(g.dtype), grads)
    return clipped_grads, total_norm
