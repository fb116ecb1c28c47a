"""A test kit for kafkalike and for code that talks to Kafka: raw protocol clients, broker fixtures."""
