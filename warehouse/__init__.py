"""The Parquet lake: table contracts, layout, the atomic writer, DuckDB access, the query runner.

Importing this package loads neither duckdb nor polars; they are imported where queries run.
"""
