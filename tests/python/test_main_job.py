"""The main job's training script (examples/python/train_lm.py) with a tiny model
on the CPU: the loss falls from that of a uniform guess, a run stopped and
resumed gives the loss history of a run without a break, Ctrl-C writes a
checkpoint, sampling produces bytes, and generate.py samples from the checkpoint
(a Hugging Face folder) the bytes of greedy decoding, past the model's context."""

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
sys.path.insert(0, str(EXAMPLES))
try:
    from tessera import mlx_alias
    mlx_alias.install()
    import lm
finally:
    sys.path.remove(str(EXAMPLES))


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

    # The checkpoint is a model folder: generate.py decodes greedily past the
    # context of 32 bytes, with the cache's sliding window.
    model = lm.load_model(str(tmp_path / "whole"))
    assert model.args.max_position_embeddings == 32 and model.args.vocab_size == 256
    want, _ = lm.generate(model, mx.array([list(b"im")]), 48, window=32)
    result = subprocess.run([sys.executable, str(EXAMPLES / "generate.py"), str(tmp_path / "whole"),
                             "--prompt", "im", "--max-tokens", "48", "--cpu"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split("\nprompt: 2 tokens")[0] == "im" + bytes(want[0]).decode(
        errors="replace")
    first = np.argmax(np.array(model(mx.array([list(b"im")]))[0, -1]))
    assert want[0][0] == first

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
