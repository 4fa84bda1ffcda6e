"""A local cluster as processes: brokers, an embedded ZooKeeper or an ensemble, the
cluster directory that records them, and the security files of a secured cluster."""
