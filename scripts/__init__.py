"""The repository's tools (installed as `semif_sagemaker.tools`), each one package reached as `semif X`
(`python -m scripts.X` in a checkout):

- `package`: a GGUF as SageMaker's model.tar.gz (`semif package`), an existing one checked (`semif check`);
- `local`: both endpoints on this machine behind a SageMaker-runtime gateway;
- `smoke`: one call to the chat or decision endpoint, or the System One API, checked;
- `keys`: the System One API's keys on AWS;
- `evaluate`: decision quality on labelled cases (`semif evaluate`), a calibration fitted (`semif calibrate`);
- `batch`: a JSON Lines file answered through an endpoint or a Batch Transform job;
- `demo`: the README's demo (in a clone);
- `common`: what they share (the command contract, endpoint discovery, polling, the retrying HTTP transport);
- `dev`: the repository's own tooling (bootstrap, test command, llama.cpp build, locks), not in the wheel;
- `payloads`: the smoke tests' default requests.
"""
