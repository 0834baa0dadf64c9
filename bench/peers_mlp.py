"""PyTorch's side of bench/mlp.h: value_and_grad of a 4-layer perceptron (width
1024, batch 256, float32, relu, mean squared error) in eager autograd."""
import torch

from measure import time_median


def mlp_step(dev):
    """Median seconds of one training step's forward and backward on device dev."""
    width, batch, layers = 1024, 256, 4

    def values(shape, scale, salt):
        n = 1
        for s in shape:
            n *= s
        a = (torch.arange(n, device=dev, dtype=torch.int64) * (salt * 7 + 13)) % 1021
        return (a.float() * (scale / 1021.0) - scale / 2).reshape(shape)
    params = []
    for l in range(layers):
        params.append(values((width, width), 2.0 / width ** 0.5, l).requires_grad_())
        params.append(values((width,), 0.1, l + 10).requires_grad_())
    x, y = values((batch, width), 2.0, 20), values((batch, width), 2.0, 21)

    def step():
        for p in params:
            p.grad = None
        h = x
        for l in range(layers):
            h = torch.addmm(params[2 * l + 1], h, params[2 * l].t())
            if l + 1 < layers:
                h = torch.relu(h)
        loss = ((h - y) ** 2).mean()
        loss.backward()
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    return time_median(step, 20, 3, sync)
