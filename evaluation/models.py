"""Human-baseline studies: samples, participants, responses."""
