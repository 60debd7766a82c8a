"""The engine: the GGUF file and llama.cpp (loading, tokens, the KV cache, prefix reuse, batching rows into exact
calls, threads). It is handed prompt plans and gives back logits rows; it imports nothing from the core, the doors
or the settings (it is handed what it reads of them: `llama_settings.LlamaSettings`).
"""
