"""``txnchaos acls``: Kafka's kafka-acls.sh over CreateAcls / DescribeAcls / DeleteAcls."""
