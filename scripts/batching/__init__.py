"""Decisions in bulk: a JSON Lines file of requests answered through an endpoint or a Batch Transform job.

One job per module: `records` reads the input and tells each line's contract (a SemIf decision known by its id, a
System One request by its line number), `chunking` packs lines into requests under the body limit, `targets` sends
one request (the local gateway, a container, a real-time endpoint), `realtime` runs the requests with client-side
concurrency, `transform` runs a Batch Transform job, `join` matches answers to input lines, `systemone_lines` says
where a System One answer or error belongs, `resume` reads and appends the output file, `progress` shows the bar and
the summary. `scripts/batch.py` is the command line.
"""
