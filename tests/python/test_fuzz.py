"""Runs every case of fuzz_cases.py on Tessera: a bad call raises the kind of
exception the table records, with a message that names the op; an edge case
that succeeds gives the NumPy reference's dtype and values. The session keeps
working after each case. The cases run on the CPU, where the table's outcomes
were taken from MLX."""

import numpy as np
import pytest

import tessera.core as mx
import tessera.nn as nn
import tessera.optimizers as optim

import fuzz_cases

fuzz_cases.bind(mx, nn, optim)


@pytest.fixture(autouse=True)
def on_the_cpu():
    with mx.stream(mx.cpu):
        yield


@pytest.mark.parametrize("case", fuzz_cases.CASES, ids=lambda c: c.name)
def test_fuzz_case(case):
    if case.kind is None:
        got = case.call()
        got = np.array(got) if isinstance(got, mx.array) else got
        want = case.ref()
        assert fuzz_cases.same_value(got, want), f"{case.name}: {got!r} != {want!r}"
    else:
        with pytest.raises(Exception) as info:
            case.call()
        assert type(info.value) is case.kind, f"{case.name}: {info.type.__name__}: {info.value}"
        message = str(info.value)
        assert any(op in message for op in case.ops), f"{case.name}: {message!r} names none of {case.ops}"
    assert (mx.arange(4) * 2).tolist() == [0, 2, 4, 6]


def test_table_names_are_unique():
    names = [c.name for c in fuzz_cases.CASES]
    assert len(names) == len(set(names)) >= 500
