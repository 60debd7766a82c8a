# The README's two commands, and the fast tier beside the second. Each bootstraps what it needs (idempotent,
# seconds when done): `make demo` what the demo runs, `make test` also what only the tests use.
.PHONY: demo test test-fast bootstrap bootstrap-demo lock

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

# Regenerate the decision image's hash-pinned lock files from container/requirements*.txt.
lock: bootstrap-demo
	@.venv/bin/python -m scripts.dev.lock_image_requirements
