"""The Kafka-protocol listener: Kafka's own clients and tools reach replog's partitions."""
