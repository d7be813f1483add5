"""Read-only cluster APIs that every node answers from its cluster view: Metadata,
DescribeCluster, DescribeConfigs and FindCoordinator."""
