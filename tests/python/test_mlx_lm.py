"""mlx-lm (from PyPI, unmodified) runs on Tessera through the `mlx` alias
(python -m tessera.run -m mlx_lm ...), on the CPU, with local model folders
made here: a tiny random Llama and a tiny Qwen3 mixture-of-experts, their
weights as safetensors in Hugging Face's layout, and a byte-level BPE
tokenizer trained offline on a few sentences (the `tokenizers` package).

`generate` produces the tokens of greedy decoding with a forward pass written
here in NumPy (float64), `convert -q` writes a 4-bit model that generates those
of its dequantized weights, and `lora` trains adapters whose reported training
loss goes down."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

TEXT = [
    "the quick brown fox jumps over the lazy dog",
    "a tiny model learns the same sentence again and again",
    "tessera runs programs written for mlx on cpus and gpus",
    "hello world, this is a small test of the language model",
]
ENV = dict(os.environ, TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1",
           TRANSFORMERS_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1")


def mlx_lm(*args, timeout=120):
    """Runs `python -m tessera.run -m mlx_lm <args>`; returns its stdout."""
    cmd = [sys.executable, "-m", "tessera.run", "-m", "mlx_lm", *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=ENV)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def write_tokenizer(folder):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(TEXT, trainer)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>",
        "eos_token": "</s>", "model_max_length": 512}))
    return tok.get_vocab_size()


def write_model(folder, config, shapes, seed):
    """config.json and model.safetensors with N(0, 0.2) weights (norms at 1):
    large enough that greedy decoding does not repeat one token."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in shapes.items():
        w = np.ones(shape) if "norm" in name else rng.normal(0, 0.2, shape)
        weights[name] = w.astype(np.float32)
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(config))


def attention_shapes(p, h, heads, kv_heads, head_dim):
    return {f"{p}.self_attn.q_proj.weight": (heads * head_dim, h),
            f"{p}.self_attn.k_proj.weight": (kv_heads * head_dim, h),
            f"{p}.self_attn.v_proj.weight": (kv_heads * head_dim, h),
            f"{p}.self_attn.o_proj.weight": (h, heads * head_dim),
            f"{p}.input_layernorm.weight": (h,),
            f"{p}.post_attention_layernorm.weight": (h,)}


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llama")
    vocab = write_tokenizer(folder)
    h, inter, layers = 64, 128, 2
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": h,
              "intermediate_size": inter, "num_hidden_layers": layers,
              "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-5,
              "vocab_size": vocab, "max_position_embeddings": 256, "rope_theta": 10000.0,
              "tie_word_embeddings": True, "bos_token_id": 0, "eos_token_id": 1,
              "torch_dtype": "float32"}
    shapes = {"model.embed_tokens.weight": (vocab, h), "model.norm.weight": (h,)}
    for l in range(layers):
        p = f"model.layers.{l}"
        shapes.update(attention_shapes(p, h, 4, 2, h // 4))
        shapes.update({f"{p}.mlp.gate_proj.weight": (inter, h),
                       f"{p}.mlp.up_proj.weight": (inter, h),
                       f"{p}.mlp.down_proj.weight": (h, inter)})
    write_model(folder, config, shapes, seed=0)
    return folder


@pytest.fixture(scope="module")
def qwen3_moe(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qwen3_moe")
    vocab = write_tokenizer(folder)
    h, head_dim, experts, moe_inter, layers = 32, 16, 4, 32, 2
    config = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"],
              "hidden_size": h, "intermediate_size": 64, "num_hidden_layers": layers,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": head_dim,
              "num_experts": experts, "num_experts_per_tok": 2, "decoder_sparse_step": 1,
              "mlp_only_layers": [], "moe_intermediate_size": moe_inter,
              "rms_norm_eps": 1e-6, "vocab_size": vocab, "rope_theta": 10000.0,
              "tie_word_embeddings": False, "max_position_embeddings": 256,
              "norm_topk_prob": True, "bos_token_id": 0, "eos_token_id": 1}
    shapes = {"model.embed_tokens.weight": (vocab, h), "model.norm.weight": (h,),
              "lm_head.weight": (vocab, h)}
    for l in range(layers):
        p = f"model.layers.{l}"
        shapes.update(attention_shapes(p, h, 4, 2, head_dim))
        shapes.update({f"{p}.self_attn.q_norm.weight": (head_dim,),
                       f"{p}.self_attn.k_norm.weight": (head_dim,),
                       f"{p}.mlp.gate.weight": (experts, h)})
        for e in range(experts):
            shapes.update({f"{p}.mlp.experts.{e}.gate_proj.weight": (moe_inter, h),
                           f"{p}.mlp.experts.{e}.up_proj.weight": (moe_inter, h),
                           f"{p}.mlp.experts.{e}.down_proj.weight": (h, moe_inter)})
    write_model(folder, config, shapes, seed=1)
    return folder


def load_weights(folder):
    """The model's weights in float64; affine-quantized ones (packed uint32
    `weight`, `scales`, `biases`) dequantized: w = scale * q + bias per group."""
    from safetensors.numpy import load_file

    cfg = json.loads((folder / "config.json").read_text())
    w = {}
    for f in sorted(folder.glob("*.safetensors")):
        w.update({k: v.astype(np.float64) if v.dtype != np.uint32 else v
                  for k, v in load_file(str(f)).items()})
    for key in [k for k in w if k.endswith(".scales")]:
        base, bits = key[:-len(".scales")], cfg["quantization"]["bits"]
        packed = w.pop(base + ".weight")
        shifts = np.arange(0, 32, bits, dtype=np.uint32)
        q = ((packed[..., None] >> shifts) & ((1 << bits) - 1)).reshape(packed.shape[0], -1)
        scales, biases = w.pop(key), w.pop(base + ".biases")
        group = q.shape[-1] // scales.shape[-1]
        w[base + ".weight"] = (q.reshape(q.shape[0], -1, group) * scales[..., None]
                               + biases[..., None]).reshape(q.shape)
    return cfg, w


def reference_greedy(folder, prompt_ids, n):
    """Greedy decoding of n tokens with the model of `folder` in NumPy: Llama,
    or Qwen3-MoE (per-head q/k norms, a softmax router over top-k experts)."""
    cfg, w = load_weights(folder)
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", cfg["hidden_size"] // heads)

    def rms(x, weight):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + cfg["rms_norm_eps"]) * weight

    def rope(x):  # (heads, T, hd), rotating (x[i], x[i + hd/2])
        half = hd // 2
        angle = np.arange(x.shape[1])[:, None] * cfg["rope_theta"] ** (-np.arange(half) / half)
        c, s = np.cos(angle), np.sin(angle)
        return np.concatenate([x[..., :half] * c - x[..., half:] * s,
                               x[..., :half] * s + x[..., half:] * c], -1)

    def swiglu(h, gate, up, down):
        g = h @ gate.T
        return (g / (1 + np.exp(-g)) * (h @ up.T)) @ down.T

    def forward(ids):
        x, t = w["model.embed_tokens.weight"][ids], len(ids)
        for layer in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{layer}."
            h = rms(x, w[p + "input_layernorm.weight"])
            q, k, v = ((h @ w[f"{p}self_attn.{n}_proj.weight"].T).reshape(t, -1, hd)
                       for n in "qkv")
            if "q_norm" in "".join(w):
                q, k = rms(q, w[p + "self_attn.q_norm.weight"]), rms(k, w[p + "self_attn.k_norm.weight"])
            q, k, v = (a.transpose(1, 0, 2) for a in (q, k, v))
            q, k = rope(q), np.repeat(rope(k), heads // kv_heads, 0)
            scores = q @ k.transpose(0, 2, 1) / np.sqrt(hd) + np.triu(np.full((t, t), -np.inf), 1)
            a = np.exp(scores - scores.max(-1, keepdims=True))
            a = a / a.sum(-1, keepdims=True) @ np.repeat(v, heads // kv_heads, 0)
            x = x + a.transpose(1, 0, 2).reshape(t, -1) @ w[p + "self_attn.o_proj.weight"].T
            h = rms(x, w[p + "post_attention_layernorm.weight"])
            if p + "mlp.gate.weight" in w:
                logits = h @ w[p + "mlp.gate.weight"].T
                gates = np.exp(logits - logits.max(-1, keepdims=True))
                gates /= gates.sum(-1, keepdims=True)
                top = np.argsort(-gates, -1)[:, :cfg["num_experts_per_tok"]]
                y = np.zeros_like(x)
                for i in range(t):
                    g = gates[i, top[i]] / gates[i, top[i]].sum()
                    for e, ge in zip(top[i], g):
                        y[i] += ge * swiglu(h[i], *(w[f"{p}mlp.experts.{e}.{n}_proj.weight"]
                                                    for n in ("gate", "up", "down")))
                x = x + y
            else:
                x = x + swiglu(h, *(w[f"{p}mlp.{n}_proj.weight"] for n in ("gate", "up", "down")))
        head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
        return rms(x, w["model.norm.weight"]) @ head.T

    out = []
    for _ in range(n):
        out.append(int(forward(list(prompt_ids) + out)[-1].argmax()))
        if out[-1] == cfg["eos_token_id"]:
            break
    return out


# Token ids of greedy decoding through mlx-lm's Python interface.
STREAM = """
import json, sys
from mlx_lm import load, stream_generate
from mlx_lm.sample_utils import make_sampler
model, tokenizer = load(sys.argv[1])
prompt = tokenizer.encode(sys.argv[2])
ids = [r.token for r in stream_generate(model, tokenizer, prompt, max_tokens=8,
                                        sampler=make_sampler(temp=0.0))]
print(json.dumps([prompt, ids]))
"""


def generated(out):
    """The text between mlx-lm's ========== lines, and its generation figures."""
    parts = out.split("==========")
    assert len(parts) >= 3, out
    tokens = re.search(r"Generation: (\d+) tokens", out)
    assert tokens, out
    return parts[1].strip(), int(tokens.group(1))


def check_generates(folder):
    out = mlx_lm("generate", "--model", folder, "--prompt", "the quick brown",
                 "--max-tokens", 8, "--temp", 0.0)
    text, n = generated(out)
    assert 1 <= n <= 8 and text, out
    return text


@pytest.mark.parametrize("model", ["llama", "qwen3_moe"])
def test_generate_matches_numpy(model, request):
    folder = request.getfixturevalue(model)
    check_generates(folder)
    check_matches_numpy(folder)


def check_matches_numpy(folder):
    cmd = [sys.executable, "-m", "tessera.run", "-c", STREAM, str(folder), "the quick brown"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=ENV)
    assert r.returncode == 0, r.stdout + r.stderr
    prompt, ids = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(prompt) > 1 and len(ids) >= 1
    assert ids == reference_greedy(folder, prompt, 8)[:len(ids)]
    assert len(set(ids)) > 1  # not a degenerate repetition


def test_convert_quantizes_and_generates(llama, tmp_path):
    q = tmp_path / "q4"
    mlx_lm("convert", "--hf-path", llama, "--mlx-path", q, "-q", "--q-bits", 4,
           "--q-group-size", 32)
    config = json.loads((q / "config.json").read_text())
    assert config["quantization"]["bits"] == 4 and config["quantization"]["group_size"] == 32
    from safetensors.numpy import load_file
    weights = load_file(str(next(q.glob("*.safetensors"))))
    w = weights["model.layers.0.mlp.gate_proj.weight"]
    assert w.dtype == np.uint32 and w.shape == (128, 64 * 4 // 32)
    assert weights["model.layers.0.mlp.gate_proj.scales"].shape == (128, 64 // 32)
    check_generates(q)
    check_matches_numpy(q)  # the dequantized weights in NumPy
    # Each dequantized weight is within 1.5 quantization steps of the original:
    # half a step, plus what MLX's nudge of the scale (so that 0 is exact) moves
    # the far end of a group.
    _, original = load_weights(llama)
    _, dequantized = load_weights(q)
    for name, w in original.items():
        step = np.ptp(w.reshape(w.shape[0], -1, 32), -1).max() / 15 if w.ndim == 2 else 0
        np.testing.assert_allclose(dequantized[name], w, atol=1.5 * step + 1e-3, err_msg=name)


def test_lora_training_loss_goes_down(llama, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    lines = [json.dumps({"text": t}) for t in TEXT]
    (data / "train.jsonl").write_text("\n".join(lines * 4) + "\n")
    (data / "valid.jsonl").write_text("\n".join(lines) + "\n")
    out = mlx_lm("lora", "--model", llama, "--train", "--data", data, "--iters", 12,
                 "--batch-size", 4, "--num-layers", 2, "--learning-rate", 1e-2,
                 "--steps-per-report", 4, "--steps-per-eval", 100, "--val-batches", 1,
                 "--adapter-path", tmp_path / "adapters", "--seed", 0)
    # Rows "iter  train_loss ▼|▲  tok/s  tokens" of its report (colours removed).
    rows = re.findall(r"^\s*(\d+)\s+([0-9.]+) [\u25bc\u25b2]", re.sub(r"\x1b\[[0-9;]*m", "", out),
                      re.MULTILINE)
    losses = [float(loss) for _, loss in rows]
    assert [int(it) for it, _ in rows] == [4, 8, 12], out
    assert losses[-1] < losses[0] - 0.1, out
    assert (tmp_path / "adapters" / "adapters.safetensors").exists()
