"""The cluster controller: leader election, partition and replica state machines."""
