"""semif-sagemaker installed: the `semif` command (cli), the tools behind it (semif_sagemaker.tools, the
repository's scripts/) and the CDK constructs (semif_sagemaker.cdk, the repository's stacks/)."""
