"""Which tests `make test` marks and orders by their module's path (under tests/) or the fixtures they use: read by
tests/conftest.py, and checked to exist by tests/project/test_test_layout.py."""

from __future__ import annotations

# What `make test-fast` (pytest -m "not slow") leaves out besides the tests marked `slow` where they are written: a
# test that uses one of these fixtures, itself or through another (the model served by the local endpoints or an
# adapter, the model in process, the decision image), and the tests of these modules (the model in process, a CLI
# over every environment). `make test` runs the rest beside them at the lowest priority (scripts/dev/run_tests.sh), so
# whatever decodes must be here.
SLOW_FIXTURES = frozenset({"local_endpoints", "spawn_gateway", "uncached_gateway", "adapter", "tiny_adapter",
                           "start_adapter", "matrix_adapter", "decision_image", "local_adapter", "runtime"})
SLOW_MODULES = frozenset({"adapter/test_branches.py", "adapter/test_engine_caches.py", "adapter/test_workers.py",
                          "cdk/test_cdk_cli.py", "security/test_security_checkov.py"})
# Slow, yet they never run the model (they pack it, or synthesize and scan every environment): `make test` runs them
# with the tests that need no model, beside the rest (`without_model`; a test of another module can carry the marker
# itself, such as an adapter start refused before llama.cpp loads anything).
SLOW_WITHOUT_MODEL = frozenset({"cdk/test_cdk_cli.py", "tools/package/test_packaging.py",
                                "security/test_security_checkov.py"})
# Slow, and everything of the model they run runs on one thread: no decode of theirs waits at a barrier for a thread
# that busier processes keep off its core, so `make test` runs them beside the model tests too (`one_thread`).
ON_ONE_THREAD = frozenset({"bench/test_bench_quick.py"})
# What keeps about one core busy (waiting on a server, a socket, a subprocess or its own Python)
# runs first, and so does the benchmark beside it, whose one thread then finds that idle core; the model tests that
# decode on both cores come after, when the other session's heaviest work is done.
RUN_FIRST = ("bench/test_bench_quick.py", "bench/test_cold_start.py", "cdk/artifact/test_cdk_artifact.py",
             "tools/package/test_conversion.py", "image/test_native_engine_image.py", "tools/batch/test_batch_cli.py",
             "tools/batch/test_batch_transform.py", "tools/local/test_chat_container.py", "tools/demo/test_demo.py",
             "tools/evaluate/test_evaluate_local.py", "tools/local/test_lifecycle.py",
             "tools/batch/test_openai_batch.py", "tools/smoke/test_smoke_cli.py",
             "tools/local/test_systemone_gateway.py",
             "reliability/test_chat_front.py", "reliability/test_faults.py", "reliability/test_generated_inputs.py",
             "reliability/test_hostile_inputs.py", "reliability/test_load.py", "client/test_sagemaker_sdk.py")
# Decoding most of their time, in process or in the server they wait on: what loses most beside other work on the
# machine (memory traffic as much as CPU: the engine-cache tests a third of their speed, the
# image's SIGTERM-under-load test half, beside `make test`'s other session), so they run last, when that session has
# most likely finished.
RUN_LAST = ("adapter/test_branches.py", "adapter/test_engine_caches.py", "adapter/test_workers.py",
            "tools/evaluate/test_calibration_roundtrip.py",
            "image/test_decision_image.py", "tools/local/test_api_front_local.py")
MODULE_LISTS = (SLOW_MODULES, SLOW_WITHOUT_MODEL, ON_ONE_THREAD, RUN_FIRST, RUN_LAST)  # each path a test module
