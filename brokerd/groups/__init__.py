"""Consumer groups of the Kafka listener: membership, rebalances and committed offsets."""
