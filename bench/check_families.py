"""Which model families decode correctly through goose: a one-off sweep of tiny random models.

For each family: a tiny randomly initialised model (2 layers, hidden 64, the default model's
tokenizer) is saved under /tmp/goose-families/<name>, greedy-decoded 40 tokens by transformers'
own ``generate`` on the stock model, then loaded through ``goose_runtime.model.load_model`` and
decoded with ``ar`` (must equal ``generate``) and ``pld``, ``tr``, ``goose@8`` (must equal ``ar``).
A family goose refuses (ALiBi, recurrent or chunked layers) prints its one-line error. The six
families of ``tests/test_architectures.py`` are kept there as a test; this is the wider check the
README quotes (6 Dec 2026). Run: ``.venv/bin/python bench/check_families.py [NAME ...]`` (~2 min).
"""
import sys, os, torch, transformers as tf, sysconfig, pathlib
from transformers import AutoModelForCausalLM, AutoTokenizer
from goose_runtime.model import load_model, default_model_dir
from goose_runtime.config import DecodeConfig
from goose_runtime.decoder import Decoder
from goose_runtime.runner import parse_labeled
ROOT = "/tmp/goose-families"
tok = AutoTokenizer.from_pretrained(str(default_model_dir()), local_files_only=True)
S = dict(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
L = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)
C = {
 "llama_rope": lambda: tf.LlamaConfig(**L, num_key_value_heads=2, rope_scaling={"rope_type":"linear","factor":2.0}, **S),
 "qwen2": lambda: tf.Qwen2Config(**L, num_key_value_heads=2, **S),
 "gemma": lambda: tf.GemmaConfig(**L, num_key_value_heads=2, head_dim=16, **S),
 "gemma3": lambda: tf.Gemma3TextConfig(**L, num_key_value_heads=2, head_dim=16, sliding_window=16, **S),
 "cohere2": lambda: tf.Cohere2Config(**L, num_key_value_heads=2, sliding_window=16, **S),
 "olmo2": lambda: tf.Olmo2Config(**L, num_key_value_heads=2, **S),
 "granite": lambda: tf.GraniteConfig(**L, num_key_value_heads=2, **S),
 "stablelm": lambda: tf.StableLmConfig(**L, num_key_value_heads=2, **S),
 "falcon": lambda: tf.FalconConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, new_decoder_architecture=True, num_kv_heads=2, **S),
 "gpt_neox": lambda: tf.GPTNeoXConfig(**L, **S),
 "gptj": lambda: tf.GPTJConfig(n_embd=64, n_layer=2, n_head=4, rotary_dim=8, **S),
 "bloom": lambda: tf.BloomConfig(hidden_size=64, n_layer=2, n_head=4, **S),
 "starcoder2": lambda: tf.Starcoder2Config(**L, num_key_value_heads=2, sliding_window=16, **S),
 "phi": lambda: tf.PhiConfig(**L, **S),
 "codegen": lambda: tf.CodeGenConfig(n_embd=64, n_layer=2, n_head=4, rotary_dim=8, **S),
 "smollm3": lambda: tf.SmolLM3Config(**L, num_key_value_heads=2, pad_token_id=0, **S),
 "gpt_bigcode": lambda: tf.GPTBigCodeConfig(n_embd=64, n_layer=2, n_head=4, **S),
 "mpt": lambda: tf.MptConfig(d_model=64, n_layers=2, n_heads=4, **S),
 "gpt_oss": lambda: tf.GptOssConfig(**L, num_key_value_heads=2, head_dim=16, sliding_window=16, num_local_experts=4, num_experts_per_tok=2, **S),
 "qwen3_moe": lambda: tf.Qwen3MoeConfig(**L, num_key_value_heads=2, head_dim=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, **S),
 "falcon_alibi": lambda: tf.FalconConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, alibi=True, **S),
 "llama4": lambda: tf.Llama4TextConfig(**L, num_key_value_heads=2, head_dim=16, **S),
}
src = (pathlib.Path(sysconfig.get_paths()["stdlib"]) / "heapq.py").read_text()
p = src[src.index('"""')+3:][:400]; prompt = p + "\n\n" + p[:80]
ids = tok(prompt)["input_ids"]
for name in (sys.argv[1:] or C):
    try:
        torch.manual_seed(0); m = AutoModelForCausalLM.from_config(C[name]()); d = os.path.join(ROOT, name)
        m.save_pretrained(d); tok.save_pretrained(d)
        ref = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
        with torch.no_grad():
            gen = ref.generate(torch.tensor([ids]), max_new_tokens=40, do_sample=False)[0, len(ids):].tolist()
        b = load_model(d, device="cpu")
        ar = Decoder(b, parse_labeled("ar"), DecodeConfig(max_new_tokens=40)).decode(ids).token_ids
        res = {}
        for meth in ["pld", "tr", "goose@8"]:
            r = Decoder(b, parse_labeled(meth), DecodeConfig(max_new_tokens=40)).decode(ids)
            res[meth] = (r.token_ids == ar, round(40/len(r.cycles),2))
        print(f"RESULT {name}: ar==generate {ar==gen} ({b.model.config._attn_implementation})", res, flush=True)
    except Exception as e:
        print(f"RESULT {name}: ERROR {type(e).__name__}: {str(e)[:200]}", flush=True)
