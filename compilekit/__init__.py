"""compilekit: what torch.compile did to your attention, and whether it was worth it."""

__version__ = "0.1.0"
