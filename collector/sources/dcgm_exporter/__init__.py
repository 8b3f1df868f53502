"""dcgm-exporter: exposition parsing, metric aliases, rows and the direct scraper."""
