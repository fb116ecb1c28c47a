"""Differential runs: the same raw requests to Apache Kafka and to kafkalike, compared field by field."""
