"""After the timed calls: profile, kernel map, roofline, diagnostics, environment."""
