"""The stack's security shape: the two customer managed keys (keys.py), IAM rules applied to every role once the
stack is built (iam_hardening.py), the template scanners and the findings we accept (nag.py), and VPC mode's
execution-role statements (vpc_access.py) and service endpoints (vpc_endpoints.py)."""
