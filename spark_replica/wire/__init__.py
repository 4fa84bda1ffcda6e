"""The wire engine: pure codecs for both listeners' protocols, no I/O.

One primitives module (primitives.py: the Reader and Writer of every field type, with
the bounds check of bounds.py) and one table engine (schema.py) under both protocols:
kafka/ holds Kafka's message tables, headers and record batches; native/ holds the
replog protocol's messages. Nothing here opens a socket, starts a thread or touches a
file, so every codec is tested with plain values (tests/unit/test_wire_is_pure.py).
"""
