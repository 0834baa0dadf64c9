"""The digits experiment that examples/python/train_digits.py runs on Tessera and
bench/peers_digits.py on PyTorch: its command line and its data split, in one
place so that the two compare line for line. Needs scikit-learn."""

import argparse

import numpy as np


def parser(description):
    """The options both programs take."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cpu", action="store_true", help="run on the CPU even with a GPU")
    return p


def split(seed, label_dtype):
    """x_train, x_test, y_train, y_test: the 8x8 images scaled to [0, 1] as
    float32, a fifth held out for the test, stratified by digit."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(label_dtype)
    return train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)
