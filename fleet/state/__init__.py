"""The state database and the stores that share it: first-seen dates, the job journal, the night's holds, the
maintenance log."""
