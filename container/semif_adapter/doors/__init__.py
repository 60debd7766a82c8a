"""The doors: HTTP routing and each contract a client speaks (SemIf, System One, OpenAI Decisions): its schema,
parsing, errors and rendering. A door turns a request into the core's `Question`s and the core's answers into its
own shapes; a new contract is a new module here and nothing else changes. Imports the core and the engine, never
the other way round.
"""
