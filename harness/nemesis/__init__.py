"""The nemesis: the fault schedule (explicit and seeded random) and its execution
against links (fault proxy), nodes (launcher) and clients (workload processes)."""
