"""PyTorch's side of examples/python/train_digits.py: the same model (64-256-256-10
perceptron, relu, dropout 0.1), data split, batches, AdamW with cosine decay and
epochs, in eager PyTorch on the same device. Prints the throughput and the test
accuracy in the example's format, so the two runs compare line for line.

    python bench/peers_digits.py [--epochs 30] [--cpu]
"""
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                                "python"))
import digits_data  # noqa: E402


def main():
    args = digits_data.parser(__doc__.splitlines()[0]).parse_args()
    dev = "cuda" if torch.cuda.is_available() and not args.cpu else "cpu"
    torch.manual_seed(args.seed)

    x_train, x_test, y_train, y_test = digits_data.split(args.seed, np.int64)
    xtr, ytr = torch.tensor(x_train, device=dev), torch.tensor(y_train, device=dev)
    xte, yte = torch.tensor(x_test, device=dev), torch.tensor(y_test, device=dev)
    h = args.hidden
    model = torch.nn.Sequential(
        torch.nn.Linear(64, h), torch.nn.ReLU(), torch.nn.Dropout(0.1),
        torch.nn.Linear(h, h), torch.nn.ReLU(), torch.nn.Dropout(0.1),
        torch.nn.Linear(h, 10)).to(dev)
    steps = args.epochs * ((len(xtr) + args.batch_size - 1) // args.batch_size)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps, eta_min=args.lr * 0.05)
    rng = np.random.default_rng(args.seed)
    samples, n_steps, train_time = 0, 0, 0.0
    for _ in range(args.epochs):
        order = rng.permutation(len(xtr))
        tic = time.perf_counter()
        for start in range(0, len(order), args.batch_size):
            idx = torch.tensor(order[start:start + args.batch_size], device=dev)
            loss = torch.nn.functional.cross_entropy(model(xtr[idx]), ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            loss.item()  # the example reads every loss too
            samples += len(idx)
            n_steps += 1
        train_time += time.perf_counter() - tic
    model.eval()
    with torch.no_grad():
        acc = (model(xte).argmax(1) == yte).float().mean().item()
    print(f"device: {dev}, PyTorch {torch.__version__}")
    print(f"throughput: {samples / train_time:,.0f} samples/s "
          f"({n_steps / train_time:,.1f} steps/s) over {train_time:.2f} s of training")
    print(f"test accuracy: {acc:.4f}")


if __name__ == "__main__":
    main()
