"""What a door costs: the same questions through OpenAI's door and System One's, taking turns, run as
`python -m bench.doors`."""
