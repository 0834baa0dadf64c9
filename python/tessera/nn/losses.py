"""Loss functions."""

import math
from typing import Literal, Optional

import tessera.core as mx

Reduction = Literal["none", "mean", "sum"]


def _take_class(x, indices, axis):
    """``x`` at the class ``indices`` (``x.ndim - 1`` dims) along ``axis``."""
    return mx.squeeze(mx.take_along_axis(x, mx.expand_dims(indices, axis), axis=axis), axis)


def _reduce(loss, reduction: Reduction = "none"):
    if reduction == "mean":
        return mx.mean(loss)
    if reduction == "sum":
        return mx.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"Invalid reduction {reduction!r}; must be 'none', 'mean' or 'sum'.")


def _apply_weights(loss, weights, op):
    """loss times weights, which must have its shape; no weights: loss."""
    if weights is None:
        return loss
    if weights.shape != loss.shape:
        raise ValueError(f"[{op}] weights shape {weights.shape} does not match the loss "
                         f"shape {loss.shape}.")
    return loss * weights


def cross_entropy(logits, targets, weights=None, axis: int = -1,
                  label_smoothing: float = 0.0, reduction: Reduction = "none"):
    """``logsumexp(logits) - score``; targets are class indices or probabilities."""
    if label_smoothing < 0 or label_smoothing >= 1:
        raise ValueError(f"[cross_entropy] label smoothing must be in [0, 1), got "
                         f"{label_smoothing}.")
    targets_as_probs = targets.ndim == logits.ndim

    def _drop_dim(shape, axis):
        shape = list(shape)
        shape.pop(axis)
        return shape

    if targets_as_probs and targets.shape != logits.shape:
        raise ValueError(f"[cross_entropy] targets shape {targets.shape} does not match "
                         f"logits shape {logits.shape}.")
    if not targets_as_probs and list(targets.shape) != _drop_dim(logits.shape, axis):
        raise ValueError(f"[cross_entropy] targets shape {targets.shape} does not match "
                         f"logits shape {logits.shape} without axis {axis}.")

    if targets_as_probs:
        score = mx.sum(logits * targets, axis=axis)
    else:
        score = _take_class(logits, targets, axis)

    logsumexp_logits = mx.logsumexp(logits, axis=axis)
    if label_smoothing > 0:
        adjusted_score = (1 - label_smoothing) * score
        mean_logits = mx.mean(logits, axis=axis)
        smoothed_loss = -mean_logits * label_smoothing
        loss = logsumexp_logits - adjusted_score + smoothed_loss
    else:
        loss = logsumexp_logits - score

    loss = _apply_weights(loss, weights, "cross_entropy")
    return _reduce(loss, reduction)


def binary_cross_entropy(inputs, targets, weights=None, with_logits: bool = True,
                         reduction: Reduction = "mean"):
    """Binary cross entropy of logits (default) or probabilities."""
    if inputs.shape != targets.shape:
        raise ValueError(f"[binary_cross_entropy] inputs shape {inputs.shape} does not "
                         f"match targets shape {targets.shape}.")
    if with_logits:
        loss = mx.logaddexp(0.0, inputs) - inputs * targets
    else:
        log_inputs_clip = mx.clip(mx.log(inputs), -100, None)
        log_inputs_inv_clip = mx.clip(mx.log(1 - inputs), -100, None)
        loss = -(targets * log_inputs_clip + (1 - targets) * log_inputs_inv_clip)
    loss = _apply_weights(loss, weights, "binary_cross_entropy")
    return _reduce(loss, reduction)


def l1_loss(predictions, targets, reduction: Reduction = "mean"):
    """``|p - t|``."""
    if predictions.shape != targets.shape:
        raise ValueError(f"[l1_loss] predictions shape {predictions.shape} does not match "
                         f"targets shape {targets.shape}.")
    return _reduce(mx.abs(predictions - targets), reduction)


def mse_loss(predictions, targets, reduction: Reduction = "mean"):
    """``(p - t) ** 2``."""
    if predictions.shape != targets.shape:
        raise ValueError(f"[mse_loss] predictions shape {predictions.shape} does not "
                         f"match targets shape {targets.shape}.")
    return _reduce(mx.square(predictions - targets), reduction)


def nll_loss(inputs, targets, axis: int = -1, reduction: Reduction = "none"):
    """``-inputs[target]`` for log-probability inputs."""
    return _reduce(-_take_class(inputs, targets, axis), reduction)


def gaussian_nll_loss(inputs, targets, vars, full: bool = False, eps: float = 1e-6,
                      reduction: Reduction = "mean"):
    """``0.5 * (log(max(var, eps)) + (t - mu)**2 / max(var, eps))`` (+ const if full)."""
    if inputs.shape != targets.shape:
        raise ValueError(f"[gaussian_nll_loss] inputs shape {inputs.shape} does not match "
                         f"targets shape {targets.shape}.")
    if inputs.shape != vars.shape:
        raise ValueError(f"[gaussian_nll_loss] inputs shape {inputs.shape} does not match "
                         f"vars shape {vars.shape}.")
    vars = mx.maximum(vars, eps)
    loss = 0.5 * (mx.log(vars) + mx.square(targets - inputs) / vars)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def kl_div_loss(inputs, targets, axis: int = -1, reduction: Reduction = "none"):
    """``sum_axis exp(t) * (t - x)`` with both in log space."""
    loss = mx.sum(mx.exp(targets) * (targets - inputs), axis)
    return _reduce(loss, reduction)


def smooth_l1_loss(predictions, targets, beta: float = 1.0, reduction: Reduction = "mean"):
    """``0.5 d**2 / beta`` if ``d < beta`` else ``d - 0.5 beta``, ``d = |p - t|``."""
    if predictions.shape != targets.shape:
        raise ValueError(f"[smooth_l1_loss] predictions shape {predictions.shape} does "
                         f"not match targets shape {targets.shape}.")
    diff = mx.abs(predictions - targets)
    loss = mx.where(diff < beta, 0.5 * mx.square(diff) / beta, diff - 0.5 * beta)
    return _reduce(loss, reduction)


def triplet_loss(anchors, positives, negatives, axis: int = -1, p: int = 2,
                 margin: float = 1.0, eps: float = 1e-6, reduction: Reduction = "none"):
    """``max(||a - p|| - ||a - n|| + margin, 0)`` with ``||v|| = (sum |v|^p + eps)^(1/p)``."""
    loss = mx.maximum(
        mx.power(mx.sum(mx.power(mx.abs(anchors - positives), p), axis) + eps, 1.0 / p)
        - mx.power(mx.sum(mx.power(mx.abs(anchors - negatives), p), axis) + eps, 1.0 / p)
        + margin,
        0)
    return _reduce(loss, reduction)


def hinge_loss(inputs, targets, reduction: Reduction = "none"):
    """``max(1 - x * t, 0)``."""
    return _reduce(mx.maximum(1 - inputs * targets, 0), reduction)


def huber_loss(inputs, targets, delta: float = 1.0, reduction: Reduction = "none"):
    """``0.5 e**2`` for ``|e| <= delta`` else ``delta (|e| - 0.5 delta)``."""
    errors = inputs - targets
    abs_errors = mx.abs(errors)
    quadratic = mx.minimum(abs_errors, delta)
    linear = abs_errors - quadratic
    loss = 0.5 * quadratic ** 2 + delta * linear
    return _reduce(loss, reduction)


def log_cosh_loss(inputs, targets, reduction: Reduction = "none"):
    """``log(cosh(x - t))``, computed as ``logaddexp(e, -e) - log 2``."""
    errors = inputs - targets
    loss = mx.logaddexp(errors, -errors) - math.log(2)
    return _reduce(loss, reduction)


def cosine_similarity_loss(x1, x2, axis: int = 1, eps: float = 1e-8,
                           reduction: Reduction = "none"):
    """``sum(x1 * x2) / max(||x1|| * ||x2||, eps)`` along ``axis``."""
    x1_norm = mx.sqrt(mx.sum(mx.square(x1), axis=axis))
    x2_norm = mx.sqrt(mx.sum(mx.square(x2), axis=axis))
    loss = mx.sum(x1 * x2, axis=axis) / mx.maximum(x1_norm * x2_norm, eps)
    return _reduce(loss, reduction)


def margin_ranking_loss(inputs1, inputs2, targets, margin: float = 0.0,
                        reduction: Reduction = "none"):
    """``max(0, -y * (x1 - x2) + margin)``."""
    if not (inputs1.shape == inputs2.shape == targets.shape):
        raise ValueError(f"[margin_ranking_loss] the shapes of the arguments do not match: "
                         f"{inputs1.shape}, {inputs2.shape}, {targets.shape}.")
    differences = inputs1 - inputs2
    loss = mx.maximum(0, -targets * differences + margin)
    return _reduce(loss, reduction)
