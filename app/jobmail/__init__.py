"""Job-end mail: `gpuledger mail` as Slurm's MailProg appends the job's report (DESIGN §7)."""
