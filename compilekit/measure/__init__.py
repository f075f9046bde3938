"""Inputs, timing and the one noise note."""
