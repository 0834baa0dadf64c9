"""Trains a multi-layer perceptron on scikit-learn's handwritten digits with
tessera.nn and tessera.optimizers.

    python examples/python/train_digits.py [--epochs 30] [--out DIR] [--cpu]

Runs on the GPU when one is available (else the CPU), shows a progress bar per
epoch, prints the throughput and the test accuracy, writes the loss curve to
DIR/digits_loss.png and a checkpoint to DIR/digits_mlp.safetensors, then reloads
the checkpoint into a fresh model and checks that it gives the same accuracy.
Needs scikit-learn and matplotlib (pip install scikit-learn matplotlib).
"""

import os
import sys
import time

import numpy as np

import tessera.core as mx
import tessera.nn as nn
import tessera.optimizers as optim

import digits_data


class MLP(nn.Module):
    def __init__(self, in_dims, hidden, out_dims, dropout=0.1):
        super().__init__()
        self.layers = [nn.Linear(in_dims, hidden), nn.Linear(hidden, hidden),
                       nn.Linear(hidden, out_dims)]
        self.dropout = nn.Dropout(dropout)

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = self.dropout(nn.relu(layer(x)))
        return self.layers[-1](x)


def progress(epoch, epochs, done, total, loss, width=30):
    filled = int(width * done / total)
    bar = "#" * filled + "-" * (width - filled)
    sys.stdout.write(f"\repoch {epoch:3d}/{epochs} [{bar}] {done:4d}/{total} loss {loss:.4f}")
    sys.stdout.flush()


def accuracy(model, x, y):
    model.eval()
    pred = mx.argmax(model(mx.array(x)), axis=1)
    acc = float(mx.mean((pred == mx.array(y)).astype(mx.float32)).item())
    model.train()
    return acc


def main():
    parser = digits_data.parser(__doc__.splitlines()[0])
    parser.add_argument("--out", default=".")
    args = parser.parse_args()

    device = mx.gpu if (mx.cuda.is_available() and not args.cpu) else mx.cpu
    mx.set_default_device(device)
    print(f"device: {mx.default_device()}")
    mx.random.seed(args.seed)

    x_train, x_test, y_train, y_test = digits_data.split(args.seed, np.int32)
    print(f"digits: {len(x_train)} training and {len(x_test)} test images of 8x8 pixels")

    model = MLP(x_train.shape[1], args.hidden, 10)
    mx.eval(model.parameters())
    steps_per_epoch = (len(x_train) + args.batch_size - 1) // args.batch_size
    schedule = optim.cosine_decay(args.lr, args.epochs * steps_per_epoch, args.lr * 0.05)
    optimizer = optim.AdamW(learning_rate=schedule, weight_decay=1e-4)

    def loss_fn(xb, yb):
        return nn.losses.cross_entropy(model(xb), yb, reduction="mean")

    loss_and_grad = nn.value_and_grad(model, loss_fn)
    rng = np.random.default_rng(args.seed)
    losses = []
    samples = 0
    train_time = 0.0
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(x_train))
        tic = time.perf_counter()
        for i, start in enumerate(range(0, len(order), args.batch_size)):
            idx = order[start:start + args.batch_size]
            xb, yb = mx.array(x_train[idx]), mx.array(y_train[idx])
            loss, grads = loss_and_grad(xb, yb)
            optimizer.update(model, grads)
            mx.eval(loss, model.parameters(), optimizer.state)
            losses.append(loss.item())
            samples += len(idx)
            progress(epoch, args.epochs, i + 1, steps_per_epoch, losses[-1])
        train_time += time.perf_counter() - tic
        print(f"  test accuracy {accuracy(model, x_test, y_test):.4f}")

    test_acc = accuracy(model, x_test, y_test)
    print(f"throughput: {samples / train_time:,.0f} samples/s "
          f"({len(losses) / train_time:,.1f} steps/s) over {train_time:.2f} s of training")
    print(f"test accuracy: {test_acc:.4f} ({'meets' if test_acc >= 0.95 else 'below'} "
          f"the 0.95 target)")

    os.makedirs(args.out, exist_ok=True)
    png = os.path.join(args.out, "digits_loss.png")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(losses, linewidth=0.8, label="batch loss")
    window = max(1, steps_per_epoch)
    smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
    ax.plot(np.arange(window - 1, len(losses)), smooth, label=f"mean of {window} steps")
    ax.set_xlabel("step")
    ax.set_ylabel("cross entropy")
    ax.set_yscale("log")
    ax.set_title(f"MLP on digits (test accuracy {test_acc:.3f})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    print(f"loss curve: {png}")

    ckpt = os.path.join(args.out, "digits_mlp.safetensors")
    model.save_weights(ckpt)
    restored = MLP(x_train.shape[1], args.hidden, 10)
    restored.load_weights(ckpt)
    restored_acc = accuracy(restored, x_test, y_test)
    print(f"checkpoint: {ckpt} reloaded, test accuracy {restored_acc:.4f}")
    if restored_acc != test_acc:
        raise SystemExit("the reloaded checkpoint does not reproduce the accuracy")
    return 0 if test_acc >= 0.95 else 1


if __name__ == "__main__":
    sys.exit(main())
