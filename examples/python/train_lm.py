"""Trains a small Llama-style language model (lm.py) on the Python standard
library's source code, one byte per token, with tessera.nn and tessera.optimizers.

    python examples/python/train_lm.py [--out DIR] [--minutes 5] [--steps N] [--resume]
                                       [--cpu] [--tiny] [--sample BYTES] [--prompt TEXT]

The text is every *.py file under sysconfig's "stdlib" path, so no download is
needed; a seeded shuffle of the files holds some of them out for validation.
Runs on the GPU when one is available (a model of 24M parameters), else on
the CPU (1.6M); --tiny picks one of 27 thousand parameters for
a quick check. --steps is the length of the learning-rate schedule and
--minutes the time this run may train: training stops at whichever comes
first. A progress bar shows the loss and the tokens per second, and the
validation loss is printed every --eval-every steps. The run writes to DIR:

    config.json            the model, in Hugging Face's terms (one byte per token)
    model.safetensors      the weights, with Hugging Face's names
    optimizer.safetensors  the optimizer's state
    state.json             the configuration, the step, the seeds and the loss history
    loss.png               the training and validation loss

--resume continues from these files with the settings they hold (--steps may
extend the schedule). Each batch is a function of the seed and the step alone,
so a resumed run sees the data a run without a break would have seen. Ctrl-C
stops after the current step and writes the checkpoint. Last, the script prints
--sample bytes sampled after --prompt (generate.py DIR does the same from the
checkpoint). Needs tqdm and matplotlib.
"""

import argparse
import json
import os
import signal
import sys
import sysconfig
import time

import numpy as np
from tqdm import tqdm

import tessera.core as mx
import tessera.nn as nn
import tessera.optimizers as optim
from tessera import mlx_alias
from tessera.utils import tree_flatten, tree_unflatten

mlx_alias.install()  # lm.py and generate.py are written against MLX's names
import lm  # noqa: E402
from generate import ByteTokenizer, Streamer  # noqa: E402

# Model and training settings per device; command-line arguments override them.
PRESETS = {
    "gpu": dict(dim=512, layers=8, heads=8, kv_heads=4, hidden_dim=1408, context=512,
                batch_size=32, lr=1e-3, steps=1800, eval_every=200, eval_batches=16),
    "cpu": dict(dim=192, layers=4, heads=6, kv_heads=2, hidden_dim=512, context=128,
                batch_size=16, lr=2e-3, steps=600, eval_every=50, eval_batches=8),
    "tiny": dict(dim=32, layers=2, heads=4, kv_heads=2, hidden_dim=64, context=32,
                 batch_size=8, lr=1e-2, steps=20, eval_every=10, eval_batches=2),
}
MODEL_KEYS = ("dim", "layers", "heads", "kv_heads", "hidden_dim", "context")
TRAIN_KEYS = ("batch_size", "lr", "steps", "eval_every", "eval_batches", "seed")


def load_text(seed, validation_fraction=0.05):
    """The bytes of the standard library's *.py files, split by file into a
    training and a validation array (uint8), and a line describing them."""
    root = sysconfig.get_paths()["stdlib"]
    files = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in ("site-packages", "dist-packages")]
        files += [os.path.join(directory, n) for n in names if n.endswith(".py")]
    files.sort()
    order = np.random.default_rng(seed).permutation(len(files))
    held_out = max(1, round(validation_fraction * len(files)))

    def read(indices):
        chunks = []
        for i in sorted(indices):
            with open(files[i], "rb") as f:
                chunks.append(f.read())
        return np.frombuffer(b"".join(chunks), np.uint8)

    train, val = read(order[held_out:]), read(order[:held_out])
    about = (f"{len(files) - held_out} files ({train.size / 1e6:.1f} MB) of {root} for "
             f"training, {held_out} ({val.size / 1e6:.1f} MB) held out for validation")
    return train, val, about


def windows(data, starts, context):
    """Inputs and next-byte targets (B, context) from the windows at `starts`."""
    rows = data[np.asarray(starts)[:, None] + np.arange(context + 1)].astype(np.int32)
    return mx.array(rows[:, :-1]), mx.array(rows[:, 1:])


def training_batch(data, seed, step, batch_size, context):
    """The batch of a step: random windows drawn from (seed, step) alone."""
    rng = np.random.default_rng([seed, step])
    return windows(data, rng.integers(0, data.size - context - 1, batch_size), context)


class StopRequest:
    """Within the block, a first Ctrl-C sets `requested` (the loop then stops
    after its current step); a second raises KeyboardInterrupt at once."""

    def __enter__(self):
        self.requested = False
        self.previous = signal.signal(signal.SIGINT, self.request)
        return self

    def request(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self.previous)


def make_model(s):
    """The Llama-style model of the settings s, one byte per token, its output
    tied to the embedding."""
    model = lm.Model(lm.ModelArgs(
        hidden_size=s.dim, num_hidden_layers=s.layers, num_attention_heads=s.heads,
        num_key_value_heads=s.kv_heads, intermediate_size=s.hidden_dim, vocab_size=256,
        max_position_embeddings=s.context, tie_word_embeddings=True))
    # The projections into the residual stream start smaller, so that the
    # stream's variance does not grow with the depth.
    scale = 1 / np.sqrt(2 * s.layers)
    for block in model.layers:
        block.self_attn.o_proj.weight = block.self_attn.o_proj.weight * scale
        block.mlp.down_proj.weight = block.mlp.down_proj.weight * scale
    return model


def sample(model, prompt, count, temperature, seed, context):
    """Prints `count` bytes sampled after the text `prompt` (an empty one starts
    after a newline) as they come, with a key/value cache of the last `context`."""
    print(prompt, end="")
    streamer = Streamer(ByteTokenizer())
    tokens = list(prompt.encode() or b"\n")[-context:]
    lm.generate(model, mx.array([tokens], mx.int32), count, temperature,
                key=mx.random.key(seed), window=context, on_token=streamer)
    streamer.end()


def save_checkpoint(out, model, optimizer, state):
    lm.save_model(out, model, config={"tokenizer_class": "bytes"})
    mx.save_safetensors(os.path.join(out, "optimizer.safetensors"),
                        dict(tree_flatten(optimizer.state)))
    with open(os.path.join(out, "state.json"), "w") as f:
        json.dump(state, f, indent=1)


def plot(path, train_loss, val_loss, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    steps = np.arange(1, len(train_loss) + 1)
    ax.plot(steps, train_loss, linewidth=0.5, alpha=0.4, label="training batch")
    window = max(1, len(train_loss) // 40)
    if len(train_loss) >= window:
        smooth = np.convolve(train_loss, np.ones(window) / window, mode="valid")
        ax.plot(steps[window - 1:], smooth, label=f"training, mean of {window} steps")
    ax.plot(*zip(*val_loss), "o-", markersize=3, label="validation")
    ax.set_xlabel("step")
    ax.set_ylabel("cross entropy (nats per byte)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse_args():
    parser = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()),
        epilog="The model and training settings without a value default to the "
               "device's preset (PRESETS in this file).")
    parser.add_argument("--out", default="build/lm",
                        help="checkpoint and plot directory (default: build/lm)")
    parser.add_argument("--cpu", action="store_true", help="run on the CPU even with a GPU")
    parser.add_argument("--tiny", action="store_true", help="a tiny model for a quick check")
    parser.add_argument("--resume", action="store_true", help="continue from the checkpoint")
    parser.add_argument("--minutes", type=float, default=5.0,
                        help="time this run may train (default: 5)")
    parser.add_argument("--no-compile", action="store_true", help="do not mx.compile the step")
    for key in MODEL_KEYS + TRAIN_KEYS[:-1]:
        parser.add_argument("--" + key.replace("_", "-"), type=float if key == "lr" else int)
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the data split, the batches and the initial weights")
    parser.add_argument("--sample", type=int, default=400,
                        help="bytes to sample at the end (default: 400)")
    parser.add_argument("--prompt", default="def ", help="text the sample continues")
    parser.add_argument("--temperature", type=float, default=0.8,
                        help="of the sampling (default: 0.8; 0 picks the likeliest byte)")
    return parser.parse_args()


def load_or_start(args, device):
    """The run's settings and its state: the checkpoint's with --resume, else
    the device's preset under the given arguments and an empty history."""
    if args.resume:
        with open(os.path.join(args.out, "state.json")) as f:
            state = json.load(f)
        if args.steps is not None:
            state["settings"]["steps"] = args.steps
        return state
    preset = PRESETS["tiny" if args.tiny else device]
    settings = {k: preset.get(k) if getattr(args, k) is None else getattr(args, k)
                for k in MODEL_KEYS + TRAIN_KEYS}
    return {"step": 0, "settings": settings, "train_loss": [], "val_loss": [], "tokens": 0,
            "train_seconds": 0.0}


def make_optimizer(s):
    """AdamW with a linear warm-up, then a cosine decay to a tenth at s.steps."""
    warmup = min(100, s.steps // 10 + 1)
    schedule = optim.join_schedules(
        [optim.linear_schedule(s.lr / warmup, s.lr, warmup),
         optim.cosine_decay(s.lr, max(1, s.steps - warmup), s.lr / 10)], [warmup])
    return optim.AdamW(learning_rate=schedule, betas=[0.9, 0.95], weight_decay=0.01)


def train(model, optimizer, state, train_data, val_data, minutes, compile_step):
    """Trains from state["step"] to the schedule's end, within `minutes`, adding
    to the loss history in `state`; returns why it stopped, the tokens and the
    seconds of the steps."""
    s = argparse.Namespace(**state["settings"])

    def loss_fn(x, y):
        return nn.losses.cross_entropy(model(x), y, reduction="mean")

    loss_and_grad = nn.value_and_grad(model, loss_fn)
    arrays = [model.state, optimizer.state]

    def step(x, y):
        loss, grads = loss_and_grad(x, y)
        grads, _ = optim.clip_grad_norm(grads, 1.0)
        optimizer.update(model, grads)
        return loss

    if compile_step:
        step = mx.compile(step, inputs=arrays, outputs=arrays)

    # Fixed windows spread evenly over the held-out files.
    starts = np.linspace(0, val_data.size - s.context - 1, s.eval_batches * s.batch_size)
    val_batches = [windows(val_data, b.astype(np.int64), s.context)
                   for b in np.split(starts, s.eval_batches)]

    def validate():
        loss = mx.mean(mx.stack([loss_fn(x, y) for x, y in val_batches])).item()
        state["val_loss"].append([state["step"], loss])
        return loss

    if state["step"] == 0:
        validate()
    print(f"validation loss at step {state['step']}: {state['val_loss'][-1][1]:.4f}")
    print(f"training for {s.steps - state['step']} steps of {s.batch_size} x {s.context} "
          f"bytes (at most {minutes:g} minutes; Ctrl-C stops and saves)")

    tokens, seconds, stopped = 0, 0.0, "done"
    deadline = time.perf_counter() + minutes * 60
    with StopRequest() as stop:
        bar = tqdm(total=s.steps, initial=state["step"], unit="step", dynamic_ncols=True)
        while state["step"] < s.steps:
            tic = time.perf_counter()
            x, y = training_batch(train_data, s.seed, state["step"], s.batch_size, s.context)
            loss = step(x, y)
            mx.eval(loss, arrays)
            state["train_loss"].append(loss.item())
            state["step"] += 1
            seconds += time.perf_counter() - tic
            tokens += s.batch_size * s.context
            bar.update(1)
            bar.set_postfix({"loss": f"{state['train_loss'][-1]:.3f}",
                             "tok/s": f"{tokens / seconds:,.0f}"})
            if state["step"] % s.eval_every == 0 or state["step"] == s.steps:
                bar.write(f"step {state['step']}: validation loss {validate():.4f}")
            if stop.requested:
                stopped = "interrupted (Ctrl-C)"
                break
            if time.perf_counter() > deadline:
                stopped = f"time budget of {minutes:g} minutes spent"
                break
        bar.close()
    if state["val_loss"][-1][0] != state["step"]:
        validate()
    state["tokens"] += tokens
    state["train_seconds"] += seconds
    return stopped, tokens, seconds


def main():
    args = parse_args()
    device = "gpu" if (mx.cuda.is_available() and not args.cpu) else "cpu"
    mx.set_default_device(mx.gpu if device == "gpu" else mx.cpu)
    os.makedirs(args.out, exist_ok=True)
    state = load_or_start(args, device)
    s = argparse.Namespace(**state["settings"])

    mx.random.seed(s.seed)
    model = make_model(s)
    optimizer = make_optimizer(s)
    if args.resume:
        model.load_weights(os.path.join(args.out, "model.safetensors"))
        optimizer.state = tree_unflatten(
            list(mx.load(os.path.join(args.out, "optimizer.safetensors")).items()))
        mx.random.state[0] = mx.array(state["random_key"], mx.uint32)
    mx.eval(model.parameters(), optimizer.state)

    print(f"device: {mx.default_device()}")
    print(f"model: Llama-style, {model.parameter_count():,} parameters ({s.layers} layers, "
          f"dim {s.dim}, {s.heads} query and {s.kv_heads} key/value heads, MLP {s.hidden_dim}, "
          f"context {s.context} bytes)")
    train_data, val_data, about = load_text(s.seed)
    print(f"text: {about}")

    stopped, tokens, seconds = train(model, optimizer, state, train_data, val_data,
                                     args.minutes, not args.no_compile)
    state["random_key"] = np.array(mx.random.state[0]).tolist()
    save_checkpoint(args.out, model, optimizer, state)

    print(f"stopped at step {state['step']} of {s.steps}: {stopped}")
    if seconds > 0:
        print(f"throughput: {tokens / seconds:,.0f} tokens/s "
              f"({tokens / (s.batch_size * s.context) / seconds:.2f} steps/s) over "
              f"{seconds:.1f} s of training")
    first, last = state["val_loss"][0][1], state["val_loss"][-1][1]
    print(f"validation loss: {first:.4f} -> {last:.4f} nats per byte "
          f"({last / np.log(2):.3f} bits per byte)")
    png = os.path.join(args.out, "loss.png")
    plot(png, state["train_loss"], state["val_loss"],
         f"{model.parameter_count() / 1e6:.2f}M-parameter Llama on Python source "
         f"({state['tokens'] / 1e6:.1f}M bytes seen)")
    print(f"checkpoint: {args.out}/config.json, model.safetensors, optimizer.safetensors, "
          f"state.json")
    print(f"loss curve: {png}")

    if args.sample > 0:
        print(f"sample ({args.sample} bytes, temperature {args.temperature}):")
        print("-" * 72)
        sample(model, args.prompt, args.sample, args.temperature, s.seed, s.context)
        print("-" * 72)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
