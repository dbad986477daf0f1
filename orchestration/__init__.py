"""What a run needs of Prefect besides its tasks: the failure hook that alerts, the dashboard's night lock and the
global concurrency limits, the progress artifact, the night's events, the one retry rule, and the stop of
`fleet serve` as a run sees it. Below the tasks, which use it; no task is defined here."""
