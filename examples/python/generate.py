"""Generates text with a Llama- or Qwen-style model (lm.py) from a Hugging Face folder,
or with one of random weights.

    python examples/python/generate.py FOLDER [--prompt TEXT] [--max-tokens 100]
        [--temperature 0] [--top-p 1] [--seed 0] [--batch 1] [--cpu]
    python examples/python/generate.py --random {tiny,1b,8b} [--quantize] [--prompt IDS] ...

FOLDER holds config.json and model*.safetensors (bf16 or float32, or 4-bit as
mlx-lm's converter writes them; one file or shards), and tokenizer.json if the
prompt is text (the `tokenizers` package reads it); without a tokenizer the
prompt is token ids ("1 2 3", or --ids). train_lm.py's checkpoints are such
folders, one byte per token (config.json's tokenizer_class "bytes"). The batch
repeats the prompt. Prints the generated text (or ids) as it comes, then the
prompt and generation tokens/s and the peak memory. Temperature 0 picks the
likeliest token; else --top-p keeps the likeliest tokens holding that much of
the probability. Past the model's max_position_embeddings the key/value cache
keeps a sliding window of its last positions.

Runs on Tessera where it is installed (through its `mlx` alias), else on MLX.
"""

import argparse
import os
import sys

try:
    from tessera import mlx_alias
except ImportError:  # MLX itself
    pass
else:
    mlx_alias.install()

import mlx.core as mx

import lm


class ByteTokenizer:
    """One token per byte of the UTF-8 text (train_lm.py's models)."""

    def encode(self, text):
        return list(text.encode())

    def decode(self, ids):
        return bytes(ids).decode(errors="replace")


class FileTokenizer:
    """A tokenizer.json, read by the `tokenizers` package."""

    def __init__(self, path):
        from tokenizers import Tokenizer
        self.tokenizer = Tokenizer.from_file(path)

    def encode(self, text):
        return self.tokenizer.encode(text).ids

    def decode(self, ids):
        return self.tokenizer.decode(ids, skip_special_tokens=False)


def load_tokenizer(folder, config):
    """The folder's tokenizer, or None when it has none (or `tokenizers` is absent)."""
    if config.get("tokenizer_class") == "bytes":
        return ByteTokenizer()
    path = os.path.join(folder, "tokenizer.json")
    if os.path.exists(path):
        try:
            return FileTokenizer(path)
        except ImportError:
            print("tokenizers is not installed: the prompt is token ids", file=sys.stderr)
    return None


def prompt_ids(text, tokenizer):
    """The token ids of the prompt: its text encoded, or ids written "1 2 3" or "1,2,3"."""
    if tokenizer is not None:
        return tokenizer.encode(text)
    try:
        ids = [int(t) for t in text.replace(",", " ").split()]
    except ValueError:
        raise ValueError(f"[generate] without a tokenizer the prompt is token ids such as "
                         f"'1 2 3', got {text!r}") from None
    if not ids:
        raise ValueError("[generate] the prompt is empty")
    return ids


class Streamer:
    """Prints the text of the tokens given so far as it settles (text that ends
    in U+FFFD, a character cut short, waits for the next token)."""

    def __init__(self, tokenizer, out=sys.stdout):
        self.tokenizer, self.out, self.ids, self.printed = tokenizer, out, [], 0

    def __call__(self, ids):
        self.ids += ids
        text = self.tokenizer.decode(self.ids)
        if not text.endswith("\ufffd"):
            self.out.write(text[self.printed:])
            self.out.flush()
            self.printed = len(text)

    def end(self):
        self.out.write(self.tokenizer.decode(self.ids)[self.printed:] + "\n")


def eos_ids(config):
    eos = config.get("eos_token_id")
    return set(eos if isinstance(eos, list) else [] if eos is None else [eos])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", help="a Hugging Face model folder")
    parser.add_argument("--random", choices=sorted(lm.PRESETS),
                        help="a model of random bf16 weights of this size instead")
    parser.add_argument("--quantize", action="store_true", help="4-bit weights (with --random)")
    parser.add_argument("--prompt", help="text, or token ids without a tokenizer")
    parser.add_argument("--ids", help="the prompt as token ids, even with a tokenizer")
    parser.add_argument("--max-tokens", type=int, default=100)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=1, help="rows, each the prompt")
    parser.add_argument("--cpu", action="store_true", help="run on the CPU even with a GPU")
    args = parser.parse_args(argv)
    if (args.folder is None) == (args.random is None):
        parser.error("give a model folder or --random SIZE")
    if args.cpu:
        mx.set_default_device(mx.cpu)

    mx.random.seed(args.seed)
    if args.random:
        model, config, tokenizer = lm.random_model(lm.PRESETS[args.random],
                                                   bits=4 if args.quantize else None), {}, None
    else:
        model = lm.load_model(args.folder)
        config = lm.load_config(args.folder)
        tokenizer = load_tokenizer(args.folder, config)
    default = "Hello" if tokenizer else "1"
    ids = prompt_ids(args.ids, None) if args.ids else prompt_ids(args.prompt or default, tokenizer)
    window = model.args.max_position_embeddings
    if len(ids) + args.max_tokens <= window:
        window = None
    elif len(ids) > window:
        ids = ids[-window:]
    print(f"{args.folder or args.random}: {model.parameter_count():,} parameters"
          f"{', 4-bit' if model.args.quantization else ''}, prompt of {len(ids)} tokens, "
          f"batch {args.batch}, {mx.default_device()}", file=sys.stderr)

    stream = tokenizer is not None and args.batch == 1
    if stream:
        print(args.prompt or tokenizer.decode(ids), end="", flush=True)
        streamer = Streamer(tokenizer)
    tokens, stats = lm.generate(
        model, mx.array([ids] * args.batch, mx.int32), args.max_tokens, args.temperature,
        args.top_p, mx.random.key(args.seed), window, stop=eos_ids(config),
        on_token=streamer if stream else None)
    if stream:
        streamer.end()
    else:
        for row in tokens:
            print(tokenizer.decode(row) if tokenizer else " ".join(map(str, row)))
    print(f"prompt: {stats['prompt_tokens']} tokens, {stats['prompt_tps']:.1f} tokens/s\n"
          f"generation: {stats['generation_tokens']} tokens, "
          f"{stats['generation_tps']:.1f} tokens/s\n"
          f"peak memory: {stats['peak_memory'] / 1e9:.3f} GB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
