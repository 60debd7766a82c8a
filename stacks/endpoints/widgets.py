"""How every graph of the operations dashboard is laid out (three a row), for the dashboard and each mode's."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch

WIDTH = 8  # three graphs a row (a dashboard row is 24 wide)
HEIGHT = 6


def graph(title: str, metrics: list[cloudwatch.IMetric], *, left_label: str | None = None,
          right: list[cloudwatch.IMetric] | None = None) -> cloudwatch.GraphWidget:
    return cloudwatch.GraphWidget(title=title, left=metrics, right=right or [], width=WIDTH, height=HEIGHT,
                                  left_y_axis=cloudwatch.YAxisProps(label=left_label, show_units=False)
                                  if left_label else None)
