"""A cell's processes and their parent; sweeps, locally and on Ray."""
