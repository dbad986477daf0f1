"""What every layer speaks: the run summary (the contract with the reports), the pipeline settings, a release's key."""
