# The README's two commands, and the fast tier beside the second. Each bootstraps what it needs (idempotent,
# seconds when done): `make demo` what the demo runs, `make test` also what only the tests use.
.PHONY: demo test test-fast test-arm64 bootstrap bootstrap-demo lock

bootstrap-demo:
	@bash scripts/dev/bootstrap.sh demo

bootstrap:
	@bash scripts/dev/bootstrap.sh test

demo: bootstrap-demo
	@.venv/bin/python -m scripts.demo

test: bootstrap
	@bash scripts/dev/run_tests.sh

# Linters and every test that needs no model and no image (pytest -m "not slow"): under two minutes.
test-fast: bootstrap
	@bash scripts/dev/run_tests.sh -m "not slow"

# The decision image built for linux/arm64 (Graviton) and run under the qemu-user emulator, which this registers
# first (Debian, as root or with sudo): not in `make test` (docs/image-tests.md, "The arm64 image").
test-arm64: bootstrap
	@bash scripts/dev/arm64_emulator.sh
	@bash scripts/dev/run_tests.sh -m arm64 tests/image/test_arm64_image.py

# Regenerate the decision image's hash-pinned lock files from container/requirements*.txt.
lock: bootstrap-demo
	@.venv/bin/python -m scripts.dev.lock_image_requirements
