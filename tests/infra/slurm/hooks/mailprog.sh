#!/bin/bash
# MailProg of the test Slurm (slurm.conf). Runs the program @DIR@/hooks/gpuledger.env names as
# GPULEDGER_MAILPROG (tests/slurm_live/test_live_zz_mail.py writes it, then removes it); without
# that file the mail is dropped, as the test host has no mailer.
env_file=@DIR@/hooks/gpuledger.env
[ -r "$env_file" ] || exit 0
# shellcheck disable=SC1090
. "$env_file"
exec "$GPULEDGER_MAILPROG" "$@"
