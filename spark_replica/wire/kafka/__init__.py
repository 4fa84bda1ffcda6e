"""Kafka's wire protocol: message tables, headers, versions and record batches v2."""
