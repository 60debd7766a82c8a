"""The model.tar.gz both models load: made (or checked, or pinned in S3) at synth by source.py, and deployed as a CDK
file asset or an existing object by model_artifact.py."""
