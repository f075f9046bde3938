"""A cell's stored figure against a bare re-time in fresh processes."""
