"""Deploy-time tools: what packages, converts, checks and documents a model and its configuration before an
endpoint runs it (the CDK app, `semif package-model` and the scripts import these; the serving process does not).

- `artifact`: the model.tar.gz rules (one model, complete shards, deterministic bytes) and their checker;
- `quantize`, `agreement`, `agreement_cases`: converting a model with llama.cpp's quantizer, and measuring how far
  the converted model's decisions move from the original's;
- `kernel_paths`: which compute kernels a model's weight types take on an accelerator;
- `llama_flags` (with `llama_server_flags.json`, `llama_server_unsafe_flags.json`): the `SM_LLAMA_CPP_*` ->
  llama-server flag mapping and its checks;
- `reference`: docs/configuration-*.md, generated from the settings model and the flag list.

Dependencies point one way: these import the runtime modules (the engine, the settings), never the reverse.
"""
