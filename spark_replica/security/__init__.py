"""Security: TLS, SASL (SCRAM and PLAIN) and Kafka-style ACLs.

Pure pieces (the SCRAM exchange, the ACL decision, the client's settings) live here with
no I/O so they are unit tested alone; ZooKeeper storage is in spark_replica/zk, and the
broker's enforcement in brokerd.
"""
