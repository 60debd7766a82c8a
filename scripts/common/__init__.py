"""What the product tools share: the command contract (`command`), finding an endpoint (`discovery`), bounded
waits (`polling`), the retrying HTTP transport (`transport`) and latency summaries (`stats`)."""
