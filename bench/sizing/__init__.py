"""What a deployment needs of its instance: the adapter's share of a cold start (`python -m bench.sizing.cold_start`),
the memory of the largest question on each model (`.model_memory`) and the model re-encoded in other weight types
(`.quantization`)."""
