"""What a measurement is: cells, experiments, result records, the store. Imports no torch."""
