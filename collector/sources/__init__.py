"""Sources that read real systems and traces into the lake's contract tables."""
