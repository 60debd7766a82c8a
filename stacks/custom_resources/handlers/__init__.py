"""Lambda handlers of the stack: plain modules, unit-tested without AWS.

The custom resources' handlers (every module but `systemone_*`) are this directory as a Lambda code asset, so they
import nothing but boto3 (and its botocore), which the Lambda runtime provides. The System One API's two functions
(`key_authorizer`, `endpoint_forwarder`) import the front they share with the local gateway
(`semif_decision_client.api_front`), the container's key checker and strict JSON parser
(`semif_adapter.doors.api_keys`, `strict_json`): they are bundled with exactly those modules (stacks/handler_bundle.py).
"""
