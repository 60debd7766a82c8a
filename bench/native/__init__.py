"""Decision models on the native path: what the adapter costs in front of llama-server (`python -m bench.native`)
and what each decision type's head meets of jevcompat's conformance suite (`python -m bench.native.conformance`)."""
