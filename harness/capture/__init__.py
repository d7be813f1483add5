"""What a run records besides the workload history: metric samples scraped from the
nodes, the harness's own LSO/high-watermark samples, and the final cluster state."""
