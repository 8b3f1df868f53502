#!/bin/bash
# EpilogSlurmctld of the test Slurm (slurm.conf). Runs the program @DIR@/hooks/gpuledger.env
# names as GPULEDGER_EPILOG (tests/slurm_live/test_live_zz_mail.py writes it, then removes it);
# without that file it does nothing, so the other live tests' jobs are left as they were.
env_file=@DIR@/hooks/gpuledger.env
[ -r "$env_file" ] || exit 0
# shellcheck disable=SC1090
. "$env_file"
exec "$GPULEDGER_EPILOG" "$@"
