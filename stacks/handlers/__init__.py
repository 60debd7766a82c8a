"""Lambda handlers of the stack's custom resources: plain modules, unit-tested without AWS.

This directory is the Lambda code asset, so it holds only handler modules and imports nothing but boto3 (and its
botocore), which the Lambda runtime provides.
"""
