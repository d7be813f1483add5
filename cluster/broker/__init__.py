"""The broker role: partitions (log + producer state) and the APIs that read and write them."""
