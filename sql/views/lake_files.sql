-- lake_files: every column of the Parquet files $files (matched by name across files), and the
-- cluster and date their path names, for the columns a hive writer leaves out of the files.
--
-- Grain:   one row per row of the files
-- Reads:   Parquet files, not views
-- Params:
--   $files        the paths of the files (a list)
--   $row_numbers  whether to add file_row_number (each row's position in its file)
-- Returns: the files' own columns (and file_row_number), then __gpuledger_path_cluster (VARCHAR) and
--          __gpuledger_path_date (DATE): the values of the file's nearest `cluster=` and
--          `date=` folders, null where the path has none (or a date that does not parse).
--
-- Spark's partitionBy and pyarrow's hive partitioning keep partition columns out of the files
-- and write their values into the path percent-encoded ('a b' as cluster=a%20b); the lake's own
-- writer names the folder after warehouse.layout.safe_name, which leaves only [A-Za-z0-9._-],
-- so decoding is the identity for its folders. A value that does not decode to UTF-8 is null.
-- The path is read from DuckDB's `filename` column: evaluated once per file's vector, with no
-- per-file loop in Python.

SELECT
    *,
    TRY(url_decode(NULLIF(
        regexp_extract(__gpuledger_file, '(?:^|.*/)cluster=([^/]*)/', 1), ''
    ))) AS __gpuledger_path_cluster,
    TRY_CAST(
        regexp_extract(__gpuledger_file, '(?:^|.*/)date=([^/]*)/', 1) AS DATE
    ) AS __gpuledger_path_date
FROM read_parquet(
    $files,
    union_by_name = true,
    hive_partitioning = false,
    file_row_number = $row_numbers,
    filename = '__gpuledger_file'
)
