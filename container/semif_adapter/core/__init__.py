"""The core: questions, the prompts that ask them, the scoring methods, calibration, the result and baseline caches,
the decision services that admit and schedule questions, and the answer both give (`decided.Decided`). It knows
no contract and no HTTP; it drives the engine below it and never imports a door or the settings (it is handed what
it reads of them: `service_settings.ServiceSettings`).
"""
