"""The repository's own tooling, not shipped in the wheel: the bootstrap (`bootstrap.sh`), the test command
(`run_tests.sh`), the llama.cpp build (`build_llama_cpp`), the test matrix's PyPI models (`pypi_models`), the image's
hash-pinned locks (`lock_image_requirements`) and the llama-server flag list (`update_llama_flags`)."""
