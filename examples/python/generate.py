"""Samples Python source code from a checkpoint of train_lm.py.

    python examples/python/generate.py [--checkpoint build/lm] [--prompt TEXT]
                                       [--bytes 400] [--temperature 0.8] [--seed 0] [--cpu]

Rebuilds the Llama-style model (llama.py) from the checkpoint's state.json,
loads its weights from model.safetensors and prints the bytes it samples after
the prompt as they come (temperature 0 picks the most likely byte each time).
"""

import argparse
import codecs
import itertools
import json
import os
import sys

import tessera.core as mx

from llama import Llama, ModelArgs


def load_model(checkpoint):
    """The model saved in the directory `checkpoint` and its state.json."""
    with open(os.path.join(checkpoint, "state.json")) as f:
        state = json.load(f)
    model = Llama(ModelArgs(**state["model"]))
    model.load_weights(os.path.join(checkpoint, "model.safetensors"))
    model.eval()
    mx.eval(model.parameters())
    return model, state


def stream(model, prompt, count, temperature, seed):
    """Yields the text of `count` bytes sampled after `prompt` (str; an empty one
    starts after a newline), piece by piece (bytes that are not UTF-8 show as U+FFFD)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    tokens = model.generate(list(prompt.encode() or b"\n"), temperature, mx.random.key(seed))
    for token in itertools.islice(tokens, count):
        yield decoder.decode(bytes([token]))
    yield decoder.decode(b"", final=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default="build/lm", help="train_lm.py's --out")
    parser.add_argument("--prompt", default="def ")
    parser.add_argument("--bytes", type=int, default=400, help="how many bytes to sample")
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cpu", action="store_true", help="run on the CPU even with a GPU")
    args = parser.parse_args()
    mx.set_default_device(mx.gpu if (mx.cuda.is_available() and not args.cpu) else mx.cpu)

    model, state = load_model(args.checkpoint)
    print(f"{args.checkpoint}: step {state['step']}, validation loss "
          f"{state['val_loss'][-1][1]:.4f}, {model.parameter_count():,} parameters",
          file=sys.stderr)
    print(args.prompt, end="")
    for text in stream(model, args.prompt, args.bytes, args.temperature, args.seed):
        print(text, end="", flush=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
