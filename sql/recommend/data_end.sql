-- data_end: the end of the lake's data (the latest cluster's), the default "now" of a replay.
--
-- Grain:   one row
-- Reads:   data_extent
-- Params:  none
-- Returns: data_end (null when the lake holds no data)

SELECT max(data_end) AS data_end
FROM data_extent
