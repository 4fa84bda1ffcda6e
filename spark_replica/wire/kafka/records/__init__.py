"""Kafka's record batches v2: reading, writing, compression, and conversion to replog's."""
