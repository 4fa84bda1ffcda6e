"""Kafka's wire protocol: message layouts, headers and record batches v2, pure codecs."""
