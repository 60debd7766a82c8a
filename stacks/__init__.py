"""The CDK app and its constructs (installed as `semif_sagemaker.cdk`), a package per job, each importing only the
ones listed before it:

- config/: the settings of an environment, their rules, and the facts they are checked against (no constructs);
- security/: the keys, IAM hardening, the template scanners' accepted findings, VPC mode;
- operations/: log groups, the alarm topic, the buckets of user data (capture, Batch Transform);
- custom_resources/: the Lambda functions of the custom resources and their handlers;
- artifact/, image/: the model.tar.gz and the decision image;
- endpoints/: one model served in its hosting mode, the shared endpoint, the dashboard;
- https_api/: the System One API in front of the decision endpoint;
- prepare.py (validate -> prepare -> fit), pair.py (the pair as one construct), semif_stack.py (one environment's
  stack), cdk_app.py (the app for `-c env=NAME`).
"""
