# The two commands of the README. Both bootstrap what they need (idempotent, seconds when done).
.PHONY: demo test bootstrap

bootstrap:
	@bash scripts/bootstrap.sh

demo: bootstrap
	@.venv/bin/python -m scripts.demo

test: bootstrap
	@bash scripts/run_tests.sh
