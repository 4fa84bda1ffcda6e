"""A partition's replicas: the partition and its leader/follower state, the replica manager,
the fetchers that pull from leaders, ISR writes and the idempotent producers' state."""
