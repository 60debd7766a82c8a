"""SemIf decision adapter for SageMaker, and the model/flag rules the whole project shares.

The HTTP server scores a fixed option set with a llama.cpp model and returns probabilities.
`model_files`, `artifact` and `llama_flags` hold the rules that the CDK app and the scripts
import from here, so each rule exists once and dependencies point one way.
"""

__version__ = "0.1.0"
