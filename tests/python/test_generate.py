"""The language-model example (examples/python/lm.py, generate.py) on tiny random
Llama, Qwen2 and Qwen3 models: their logits against a float64 forward pass in
NumPy, a folder saved in Hugging Face's layout (bf16 and 4-bit, one file and
shards) reloads to the same logits, greedy generation with the key/value cache
gives the tokens of full forward passes, top-p sampling is reproducible and
stays in the top-p set with the tempered probabilities, and the command line
runs end to end."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tessera import mlx_alias

mlx_alias.install()  # lm.py is written against MLX's names

import tessera.core as mx  # noqa: E402
from tessera.utils import tree_flatten, tree_unflatten  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "python"
sys.path.insert(0, str(EXAMPLES))
try:
    import generate as cli  # noqa: E402
    import lm  # noqa: E402
finally:
    sys.path.remove(str(EXAMPLES))

CONFIGS = {
    "llama": dict(model_type="llama", rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 32}),
    "qwen2": dict(model_type="qwen2", tie_word_embeddings=True, rope_theta=1e6),
    "qwen3": dict(model_type="qwen3", head_dim=32, rms_norm_eps=1e-6),
}


def tiny_model(kind, seed=0, dtype=mx.float32, bits=None):
    """A 2-layer model of N(0, 0.3) weights (norm weights about 1, biases too)."""
    args = lm.ModelArgs(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, intermediate_size=128, vocab_size=96,
                        max_position_embeddings=64, **CONFIGS[kind])
    model = lm.Model(args)
    rng = np.random.default_rng(seed)
    model.update(tree_unflatten([
        (k, mx.array(rng.normal(1.0 if "norm" in k else 0.0, 0.3, v.shape).astype(np.float32)))
        for k, v in tree_flatten(model.parameters())]))
    model.set_dtype(dtype)
    if bits:
        lm.quantize(model, group_size=32, bits=bits)
    model.eval()
    return model


def numpy_logits(model, tokens):
    """The logits (B, T, vocab) of a float64 forward pass of model's weights
    (dequantized) in NumPy, written from the Hugging Face models' definitions."""
    a = model.args
    params = dict(tree_flatten(model.parameters()))
    w = {}
    for k, v in params.items():
        if k.endswith(".scales") or k.endswith(".biases") and k[:-7] + ".scales" in params:
            continue
        if k[:-7] + ".scales" in params:
            q = a.quantization
            v = mx.dequantize(v, params[k[:-7] + ".scales"], params[k[:-7] + ".biases"],
                              group_size=q["group_size"], bits=q["bits"])
        w[k] = np.array(v.astype(mx.float32), np.float64)

    def rms(x, weight, eps=a.rms_norm_eps):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight

    def linear(x, name):
        y = x @ w[name + ".weight"].T
        return y + w[name + ".bias"] if name + ".bias" in w else y

    D = a.head_dim
    inv = a.rope_theta ** (-np.arange(0, D, 2) / D)
    if a.rope_scaling:  # Llama 3: slow waves stretched by factor, a smooth blend between
        s = a.rope_scaling
        wavelength = 2 * np.pi / inv
        old = s["original_max_position_embeddings"]
        smooth = (old / wavelength - s["low_freq_factor"]) / (s["high_freq_factor"]
                                                                - s["low_freq_factor"])
        blended = (1 - smooth) * inv / s["factor"] + smooth * inv
        inv = np.where(wavelength > old / s["low_freq_factor"], inv / s["factor"],
                       np.where(wavelength < old / s["high_freq_factor"], inv, blended))
    B, T = tokens.shape
    angle = np.arange(T)[:, None] * inv[None, :]

    def rope(x):  # (B, H, T, D), the halves rotated (Hugging Face's rotate_half)
        x1, x2 = x[..., :D // 2], x[..., D // 2:]
        return np.concatenate([x1 * np.cos(angle) - x2 * np.sin(angle),
                               x1 * np.sin(angle) + x2 * np.cos(angle)], axis=-1)

    h = w["model.embed_tokens.weight"][tokens]
    for i in range(a.num_hidden_layers):
        p = f"model.layers.{i}."
        x = rms(h, w[p + "input_layernorm.weight"])
        q, k, v = (linear(x, p + f"self_attn.{n}_proj").reshape(B, T, -1, D) for n in "qkv")
        if a.model_type == "qwen3":
            q, k = rms(q, w[p + "self_attn.q_norm.weight"]), rms(k, w[p + "self_attn.k_norm.weight"])
        q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))
        q, k = rope(q), rope(k)
        group = a.num_attention_heads // a.num_key_value_heads
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
        scores = np.where(np.tril(np.ones((T, T), bool)), scores, -np.inf)
        p_attn = np.exp(scores - scores.max(-1, keepdims=True))
        p_attn /= p_attn.sum(-1, keepdims=True)
        out = (p_attn @ v).transpose(0, 2, 1, 3).reshape(B, T, -1)
        h = h + linear(out, p + "self_attn.o_proj")
        x = rms(h, w[p + "post_attention_layernorm.weight"])
        g = linear(x, p + "mlp.gate_proj")
        h = h + linear(g / (1 + np.exp(-g)) * linear(x, p + "mlp.up_proj"), p + "mlp.down_proj")
    h = rms(h, w["model.norm.weight"])
    return h @ w["model.embed_tokens.weight" if a.tie_word_embeddings else "lm_head.weight"].T


TOKENS = np.random.default_rng(1).integers(0, 96, (2, 9))


@pytest.mark.parametrize("kind,bits", [("llama", None), ("qwen2", None), ("qwen3", None),
                                       ("qwen2", 4)])
def test_logits_match_a_numpy_forward_pass(kind, bits):
    model = tiny_model(kind, bits=bits)
    logits = model(mx.array(TOKENS))
    assert logits.shape == (2, 9, 96) and logits.dtype == mx.float32
    np.testing.assert_allclose(np.array(logits), numpy_logits(model, TOKENS),
                               rtol=2e-4, atol=2e-4)
    if kind == "qwen2":  # biases on q, k, v only; the output tied to the embedding
        names = dict(tree_flatten(model.parameters()))
        assert "model.layers.0.self_attn.q_proj.bias" in names
        assert "model.layers.0.self_attn.o_proj.bias" not in names and "lm_head.weight" not in names


@pytest.mark.parametrize("kind,bits,shards", [("llama", None, False), ("qwen2", None, True),
                                              ("qwen3", 4, True), ("llama", 4, False)])
def test_saved_folder_reloads_with_the_same_logits(tmp_path, kind, bits, shards):
    model = tiny_model(kind, dtype=mx.bfloat16, bits=bits)
    lm.save_model(tmp_path, model, shard_bytes=16_000 if shards else 5 << 30)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == kind and config["torch_dtype"] == "bfloat16"
    assert config.get("quantization") == (bits and {"group_size": 32, "bits": 4,
                                                    "mode": "affine"})
    files = sorted(p.name for p in tmp_path.glob("*.safetensors"))
    if shards:
        index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
        assert len(files) >= 2 and sorted(set(index["weight_map"].values())) == files
        assert files[0] == f"model-00001-of-{len(files):05d}.safetensors"
        assert set(index["weight_map"]) == set(dict(tree_flatten(model.parameters())))
    else:
        assert files == ["model.safetensors"]
    if bits:
        stored = mx.load(str(tmp_path / files[-1 if shards else 0]))
        assert any(k.endswith(".scales") for k in stored)
        assert all(v.dtype == mx.uint32 for k, v in stored.items()
                   if k.endswith(".weight") and k[:-7] + ".scales" in stored)

    loaded = lm.load_model(str(tmp_path))
    assert loaded.args == model.args
    a = np.array(model(mx.array(TOKENS)).astype(mx.float32))
    b = np.array(loaded(mx.array(TOKENS)).astype(mx.float32))
    np.testing.assert_array_equal(a, b)
    assert np.isfinite(a).all() and a.std() > 0.1


@pytest.mark.parametrize("kind,bits", [("llama", None), ("qwen3", None), ("qwen2", 4)])
def test_cached_greedy_generation_matches_full_forward_passes(kind, bits):
    model = tiny_model(kind, bits=bits)
    prompt = TOKENS[:, :5]
    tokens, stats = lm.generate(model, mx.array(prompt), max_tokens=12)
    seq = prompt
    for _ in range(12):  # no cache: the whole sequence again for each token
        nxt = np.array(mx.argmax(model(mx.array(seq))[:, -1, :], axis=-1))
        seq = np.concatenate([seq, nxt[:, None]], axis=1)
    assert tokens == seq[:, 5:].tolist()
    assert len(set(tokens[0])) > 2  # not one token over and over
    assert stats["prompt_tokens"] == 10 and stats["generation_tokens"] == 24
    assert stats["prompt_tps"] > 0 and stats["generation_tps"] > 0 and stats["peak_memory"] > 0

    # A stop token ends a row; generation ends when every row has one.
    stops = {tokens[0][3], tokens[1][3]}
    stopped, _ = lm.generate(model, mx.array(prompt), max_tokens=12, stop=stops)
    for row, full in zip(stopped, tokens):
        end = next(i for i, t in enumerate(full) if t in stops)
        assert row == full[:end + 1]


def test_the_rotating_cache_keeps_the_last_positions():
    cache = lm.KVCache(1, 1, 2, 4, mx.float32, rotating=True)

    def positions(first, count):  # key value p at position p
        return mx.broadcast_to(mx.arange(first, first + count, dtype=mx.float32)[:, None],
                               (1, 1, count, 2))

    keys, _ = cache.update(positions(0, 3), positions(0, 3))
    assert np.array(keys)[0, 0, :, 0].tolist() == [0, 1, 2]
    for p in range(3, 7):
        keys, values = cache.update(positions(p, 1), positions(p, 1))
    assert cache.offset == 7 and sorted(np.array(keys)[0, 0, :, 0].tolist()) == [3, 4, 5, 6]
    with pytest.raises(ValueError, match="KVCache"):
        cache.update(positions(7, 2), positions(7, 2))
    with pytest.raises(ValueError, match="KVCache"):
        lm.KVCache(1, 1, 2, 4, mx.float32).update(positions(0, 5), positions(0, 5))


def test_top_p_sampling_is_reproducible_and_stays_in_the_top_p_set():
    rng = np.random.default_rng(2)
    logits = rng.normal(0, 2, (3, 40)).astype(np.float32)
    n, top_p, temperature = 3000, 0.7, 0.8
    rows = mx.array(np.repeat(logits, n, axis=0))  # n draws of each row at once
    key = mx.random.key(7)
    picks = np.array(lm.sample(rows, temperature, top_p, key)).reshape(3, n)
    assert picks.dtype == np.int32
    np.testing.assert_array_equal(picks, np.array(lm.sample(rows, temperature, top_p, key))
                                  .reshape(3, n))
    assert not np.array_equal(picks, np.array(lm.sample(rows, temperature, top_p,
                                                        mx.random.key(8))).reshape(3, n))
    for row, got in zip(logits, picks):
        p = np.exp(row - row.max())
        p /= p.sum()
        order = np.argsort(-p)
        keep = order[:np.searchsorted(np.cumsum(p[order]), top_p) + 1]  # first mass >= top_p
        assert set(got) <= set(keep)
        tempered = np.exp((row[keep] - row.max()) / temperature)
        tempered /= tempered.sum()
        freq = np.bincount(got, minlength=40)[keep] / n
        np.testing.assert_allclose(freq, tempered, atol=0.035)
    assert lm.sample(mx.array(logits), 0.0).tolist() == np.argmax(logits, -1).tolist()


def test_the_command_line_runs_end_to_end(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    model = tiny_model("llama")
    lm.save_model(tmp_path, model)
    words = {f"w{i}": i for i in range(96)}
    tokenizer = Tokenizer(models.WordLevel(words, unk_token="w0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    prompt = "w5 w17 w3 w80"
    want, _ = lm.generate(model, mx.array([[5, 17, 3, 80]]), max_tokens=10)

    def run(*args):
        r = subprocess.run([sys.executable, str(EXAMPLES / "generate.py"), *args],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout.splitlines()

    out = run(str(tmp_path), "--prompt", prompt, "--max-tokens", "10")
    assert out[0] == prompt + tokenizer.decode(want[0])
    assert out[1] == "prompt: 4 tokens" + out[1][16:] and out[2].startswith("generation: 10 ")
    assert out[3].startswith("peak memory: ")

    out = run("--random", "tiny", "--quantize", "--ids", "1,2,3", "--batch", "2",
              "--max-tokens", "6", "--temperature", "0.9", "--top-p", "0.9")
    rows = [list(map(int, line.split())) for line in out[:2]]
    assert all(len(r) == 6 and all(0 <= t < 1000 for t in r) for r in rows)
    assert out[2].startswith("prompt: 6 tokens") and out[3].startswith("generation: 12 tokens")

    with pytest.raises(ValueError, match="token ids"):
        cli.prompt_ids("hello", None)


def test_bad_arguments_are_value_errors():
    with pytest.raises(ValueError, match="model_type 'gpt2'"):
        lm.ModelArgs(model_type="gpt2")
    with pytest.raises(ValueError, match=r"num_attention_heads \(6\).*num_key_value_heads \(4\)"):
        lm.ModelArgs(num_attention_heads=6, num_key_value_heads=4)
    with pytest.raises(ValueError, match="rope_scaling of type 'yarn'"):
        lm.Model(lm.ModelArgs(hidden_size=64, num_attention_heads=4, num_hidden_layers=1,
                              rope_scaling={"rope_type": "yarn", "factor": 2.0}))
    with pytest.raises(ValueError, match="max_tokens 0"):
        lm.generate(tiny_model("llama"), mx.array([[1, 2]]), 0)


_PAIRS_PROBE = """
import sys
sys.path.insert(0, {examples!r})
from tessera import mlx_alias
mlx_alias.install()
import mlx.core as mx
import numpy as np
import lm
mx.set_default_device(mx.{device})
args = lm.ModelArgs.from_dict(dict(lm.PRESETS["tiny"].to_dict(), model_type={model!r}))
mx.random.seed(0)
model = lm.random_model(args, mx.bfloat16, bits=None)
cache = model.make_cache(1, 64)
logits = model(mx.array([[1, 2, 3, 4]], mx.int32), cache)
mx.eval(logits)
out = [np.array(logits.astype(mx.float32))]
y = mx.argmax(logits[:, -1, :], axis=-1)
for _ in range(3):
    logits = model(y[:, None], cache)
    y = mx.argmax(logits[:, -1, :], axis=-1)
    mx.eval(logits, y)
    out.append(np.array(logits.astype(mx.float32)))
np.save(sys.argv[1], np.concatenate([o.reshape(-1) for o in out]))
"""


@pytest.mark.parametrize("model", ["llama", "qwen3"])
def test_decoding_runs_its_pairs_as_one_task_each_and_gives_the_same_logits(
        model, device, tmp_path):
    # Note [Fused pairs]: each layer's residual sums and the norms that read
    # them, its rotations of queries and keys, and its two cache updates, run
    # as one task each; the logits are those of the nodes run one by one.
    import os
    script = _PAIRS_PROBE.format(examples=str(EXAMPLES),
                                 device="gpu" if device == mx.gpu else "cpu", model=model)
    runs = {}
    for fuse in ("1", "0"):
        env = dict(os.environ, TESSERA_HOST_PROFILE="1", TESSERA_FUSE_PAIRS=fuse)
        out = tmp_path / f"logits{fuse}.npy"
        run = subprocess.run([sys.executable, "-c", script, str(out)], env=env,
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        rows = {line.split()[0]: line.split()[1:] for line in run.stderr.splitlines() if line}
        runs[fuse] = (np.load(out), rows)
    fused, rows = runs["1"]
    # Two layers, a prompt step and three decoding steps: per step one rotation
    # pair and one cache pair a layer; sums normalised: the second layer's two,
    # the first's second, the final norm's.
    assert rows["RoPEPair"][0] == str(2 * 4)
    assert rows["SliceUpdatePair"][0] == str(2 * 4)
    assert rows["AddRMSNorm"][0] == str(4 * 4)
    assert "RoPEPair" not in runs["0"][1] and "AddRMSNorm" not in runs["0"][1]
    np.testing.assert_array_equal(fused, runs["0"][0])
