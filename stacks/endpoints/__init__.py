"""Serving a model on SageMaker: the model construct (llama_endpoint.py), what serves it in each hosting mode (one
class per mode in modes/: its own endpoint, dedicated or serverless, through own_endpoint.py; an inference
component, component.py, on the shared endpoint, shared_endpoint.py), autoscaling, start-up timeouts, the names
they all agree on (common.py), and the dashboard and warning-rate alarm that watch them (dashboard.py, widgets.py)."""
