"""ZooKeeper as replog uses it: the znode layout (znodes), sessions, and the stores that
read and write topics, groups, credentials and ACLs there, with kazoo's errors translated.
Starting ZooKeeper servers is the launcher's job (spark_replica.tools.launcher)."""
