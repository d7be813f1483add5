"""The nemesis: faults applied to links, processes and clients."""
