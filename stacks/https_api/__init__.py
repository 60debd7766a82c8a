"""Your own System One API in front of the decision endpoint: the API and its functions (front.py), its operations
(operations.py), the Lambda bundle (bundle.py) and the two handlers (handlers/). Its settings and their rules are
the configuration's (stacks/config/https_api.py, https_api_rules.py)."""
