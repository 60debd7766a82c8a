"""What operates the pair: log groups (logs.py), the alarm topic (notifications.py), the dashboard and the decision
warning-rate alarm (dashboard.py), and the buckets of user data (data_bucket.py) for captured requests and Batch
Transform (batch_transform.py)."""
