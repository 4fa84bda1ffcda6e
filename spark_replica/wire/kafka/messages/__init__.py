"""Kafka's message tables, one module per family of APIs, transcribed from Kafka's JSON."""
