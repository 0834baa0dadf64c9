"""The main job's training script (examples/python/train_lm.py) with a tiny model
on the CPU: the loss falls from that of a uniform guess, a run stopped and
resumed gives the loss history of a run without a break, Ctrl-C writes a
checkpoint, sampling produces bytes, and the key/value cache of generation gives
the logits of a full forward pass."""

import json
import math
import os
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np

import tessera.core as mx

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "python"
TRAIN = [sys.executable, str(EXAMPLES / "train_lm.py"), "--cpu", "--tiny"]


def run(out, *args):
    result = subprocess.run(TRAIN + ["--out", str(out), *args], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    with open(out / "state.json") as f:
        return json.load(f), result.stdout


def sampled_text(stdout):
    return stdout.split("-" * 72 + "\n")[1].rsplit("\n", 1)[0]


def byte_entropy():
    """The entropy (nats) of the bytes of the standard library's *.py files."""
    counts = np.zeros(256)
    for directory, subdirs, names in os.walk(sysconfig.get_paths()["stdlib"]):
        subdirs[:] = [d for d in subdirs if d not in ("site-packages", "dist-packages")]
        for name in names:
            if name.endswith(".py"):
                counts += np.bincount(np.fromfile(os.path.join(directory, name), np.uint8),
                                      minlength=256)
    p = counts[counts > 0] / counts.sum()
    return -np.sum(p * np.log(p))


def test_training_lowers_the_loss_and_resuming_continues_the_same_curve(tmp_path):
    whole, stdout = run(tmp_path / "whole", "--steps", "24", "--sample", "64", "--prompt", "im")
    assert whole["step"] == 24 and len(whole["train_loss"]) == 24
    assert [s for s, _ in whole["val_loss"]] == [0, 10, 20, 24]
    # From about a uniform guess over 256 bytes (5.55 nats) to about the entropy
    # of the bytes' frequencies (3.2-3.3 nats, depending on the Python whose
    # library is the text), which a model must learn to reach in 24 steps.
    assert abs(whole["val_loss"][0][1] - math.log(256)) < 0.5
    assert whole["val_loss"][-1][1] < byte_entropy() + 0.2
    assert np.mean(whole["train_loss"][-4:]) < np.mean(whole["train_loss"][:4]) - 1.0
    for name in ("model.safetensors", "optimizer.safetensors"):
        assert (tmp_path / "whole" / name).stat().st_size > 0
    assert (tmp_path / "whole" / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = sampled_text(stdout)
    assert text.startswith("im") and 2 + 64 // 4 <= len(text.encode()) <= 2 + 64 * 3

    # With a budget of no time the run stops after its first step.
    out = tmp_path / "stopped"
    first, stdout = run(out, "--steps", "24", "--minutes", "0", "--sample", "0")
    assert first["step"] == 1 and "time budget" in stdout
    resumed, _ = run(out, "--resume", "--sample", "0")
    assert resumed["step"] == 24
    assert resumed["train_loss"][:1] == first["train_loss"]
    assert resumed["val_loss"][:2] == first["val_loss"]
    np.testing.assert_allclose(resumed["train_loss"], whole["train_loss"], rtol=1e-5)
    np.testing.assert_allclose([v for _, v in resumed["val_loss"][2:]],
                               [v for _, v in whole["val_loss"][1:]], rtol=1e-5)


def test_ctrl_c_stops_after_a_step_and_writes_the_checkpoint(tmp_path):
    process = subprocess.Popen(TRAIN + ["--out", str(tmp_path), "--steps", "100000",
                                        "--sample", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen = b""
    while b"/100000 [" not in seen:  # the progress bar has appeared
        chunk = os.read(process.stderr.fileno(), 256)
        assert chunk, "the script ended before it trained"
        seen += chunk
    process.send_signal(signal.SIGINT)
    stdout, _ = process.communicate(timeout=60)
    assert process.returncode == 0
    assert b"interrupted" in stdout
    with open(tmp_path / "state.json") as f:
        state = json.load(f)
    assert 0 < state["step"] < 100000 and len(state["train_loss"]) == state["step"]
    assert state["val_loss"][-1][0] == state["step"]


def test_generation_with_the_cache_matches_full_forward_passes():
    sys.path.insert(0, str(EXAMPLES))
    try:
        from llama import KVCache, Llama, ModelArgs
    finally:
        sys.path.remove(str(EXAMPLES))
    mx.random.seed(1)
    args = ModelArgs(dim=32, layers=2, heads=4, kv_heads=2, hidden_dim=64, context=16)
    model = Llama(args)
    tokens = np.random.default_rng(0).integers(0, 256, args.context).tolist()
    caches = [KVCache(args.context - 1) for _ in model.layers]
    prompt = 5
    logits = model(mx.array([tokens[:prompt]]), caches)[0, -1]
    for t in range(prompt, len(tokens) + 1):
        want = model(mx.array([tokens[:t]]))[0, -1]
        np.testing.assert_allclose(np.array(logits), np.array(want), atol=1e-4, rtol=1e-4)
        if t < len(tokens):
            logits = model(mx.array([[tokens[t]]]), caches)[0, -1]
    assert caches[0].offset == args.context and caches[0].keys.shape[2] == args.context - 1

    # Past the context the cache keeps a sliding window of the last positions.
    sampled = list(zip(range(3 * args.context), model.generate(
        tokens[:prompt], temperature=0.8, key=mx.random.key(0))))
    assert all(0 <= token < 256 for _, token in sampled)
    greedy = model.generate(tokens[:prompt], temperature=0)
    first = next(greedy)
    assert first == int(np.argmax(np.array(model(mx.array([tokens[:prompt]]))[0, -1])))
