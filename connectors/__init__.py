"""Connectors from replog to data engines; Spark's lives in `connectors.spark`."""
