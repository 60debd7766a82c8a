"""The core: questions, the prompts that ask them, the scoring methods, calibration, the result and baseline caches,
and the decision service that admits and schedules questions. It knows no contract and no HTTP; it drives the
engine below it and never imports a door.
"""
