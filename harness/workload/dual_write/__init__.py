"""KIP-939's dual-write recipe as a workload: each transaction writes rows to a database and
records to Kafka, made atomic by storing the prepared Kafka transaction's state in the same
database transaction as the rows (KIP-939, "Normal processing" and "Recovery" recipes)."""
