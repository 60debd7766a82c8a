"""Both SageMaker endpoints on one machine, with no AWS account.

A chat container with the llama.cpp DLC's semantics (`chat_container`), the
decision container (`container/serve`, run as is), and a gateway that speaks
the SageMaker runtime API (`gateway`), so that unmodified boto3 and the very
smoke scripts used against AWS work against loopback; the gateway also serves
System One's own routes for the decision endpoint (`systemone_door`).
"""
