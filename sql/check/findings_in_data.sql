-- findings_in_data: no finding begins or ends after the end of its cluster's data.
--
-- Grain:   one row per finding whose span reaches past the data (or whose cluster has none)
-- Reads:   findings, data_extent
-- Params:  none
-- Returns: cluster, subject, detail
--
-- A finding's span is what the data showed; a span ending later was measured to some other
-- clock (the wall clock, a bucket's end). An open span (end_ts null) is fine: still going.

SELECT
    f.cluster,
    'finding ' || f.finding_id || ' (' || f.detector || ')' AS subject,
    CASE
        WHEN x.data_end IS NULL THEN 'the lake holds no data for this cluster'
        ELSE printf(
            'its span %s .. %s ends after the data, which ends at %s',
            strftime(f.start_ts AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S'),
            coalesce(strftime(f.end_ts AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S'), 'open'),
            strftime(x.data_end AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S')
        )
    END AS detail
FROM findings AS f
LEFT JOIN data_extent AS x
    ON x.cluster = f.cluster
WHERE x.data_end IS NULL OR f.start_ts > x.data_end OR f.end_ts > x.data_end
ORDER BY f.cluster, f.finding_id
