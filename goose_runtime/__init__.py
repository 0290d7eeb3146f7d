"""goose_runtime: lossless Goose decoding with HF transformers, recording per-node traces."""
