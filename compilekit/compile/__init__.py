"""What shapes the compiled code: variants, modes, knobs, passes, settings, capture."""
