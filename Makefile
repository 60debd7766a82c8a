# The two commands of the README. Both bootstrap what they need (idempotent, seconds when done).
.PHONY: demo test bootstrap lock

bootstrap:
	@bash scripts/bootstrap.sh

demo: bootstrap
	@.venv/bin/python -m scripts.demo

test: bootstrap
	@bash scripts/run_tests.sh

# Regenerate the decision image's hash-pinned lock files from container/requirements*.txt.
lock: bootstrap
	@.venv/bin/python -m scripts.lock_image_requirements
