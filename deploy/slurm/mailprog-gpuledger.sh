#!/bin/bash
# Slurm MailProg: send Slurm's mail with the job's gpuledger report at its end (`gpuledger mail`).
# slurm.conf:  MailProg=/usr/local/sbin/mailprog-gpuledger.sh
# Slurm runs it as SlurmUser, `mailprog-gpuledger.sh -s SUBJECT USER`, with a bare environment:
# set here where gpuledger and its configuration are ([mail] mailer is the site's mailer, called
# the same way; [lake] root the lake). If gpuledger itself cannot run (not installed, broken),
# the mail still goes out through GPULEDGER_MAIL_MAILER with one line saying so.
set -u
export PATH="${PATH:+$PATH:}/usr/local/bin:/usr/bin:/bin"
config="${GPULEDGER_CONFIG:-/etc/gpuledger/gpuledger.toml}"
[ -e "$config" ] && export GPULEDGER_CONFIG="$config"
export HOME="${HOME:-/tmp}"
gpuledger="${GPULEDGER:-gpuledger}"
fallback="${GPULEDGER_MAIL_MAILER:-/usr/bin/mail}"
body=$(cat) # Slurm sends no body; keep whatever came, for the fallback
printf '%s' "$body" | "$gpuledger" mail "$@"
rc=$?
# 0: sent; 75 (EX_TEMPFAIL): gpuledger ran the mailer and the mailer failed, so do not send twice.
case $rc in 0 | 75) exit $rc ;; esac
echo "mailprog-gpuledger: gpuledger mail exited $rc; sending the mail without a report" >&2
{
    [ -n "$body" ] && printf '%s\n\n' "$body"
    printf 'gpuledger: no report: gpuledger mail could not run (exit %s)\n' "$rc"
} | "$fallback" "$@"
