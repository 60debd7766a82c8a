"""The custom resources' Lambda functions (the image build's starter and waiter, the model artifact's pin check):
`HandlerFunction` (function.py), one least-privilege shape for each, and their handler modules (handlers/, the
functions' code asset)."""
