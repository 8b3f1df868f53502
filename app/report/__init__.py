"""The weekly fairness report (issue 8): data assembly, HTML/PDF rendering, files and email."""
