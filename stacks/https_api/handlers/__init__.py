"""The System One API's two Lambda handlers (`key_authorizer`, `endpoint_forwarder`): they import the front
they share with the local gateway (`semif_decision_client.api_front`), the container's key checker and strict
JSON parser (`semif_adapter.doors.api_keys`, `strict_json`), and are bundled with exactly those modules (../bundle.py);
this file is not part of the bundle."""
