"""What every part of the pair is operated with: its log groups (logs.py) and alarm topic (notifications.py), and
the buckets of user data (data_bucket.py) for captured requests and Batch Transform (batch_transform.py). The
dashboard reads the endpoints' metrics, so it sits with them (stacks/endpoints/dashboard.py)."""
