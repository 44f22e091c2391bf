"""The embedded Apache Kafka broker: KRaft nodes on this machine, their classpath and their Java runtime."""
