"""The domain of the night, without Prefect, in layers that import only downward (held by import-linter):
engine (the night's run) > state (the state database's stores) > rules (policy, windows, plan, rollout, what the
answers mean) > visual (what a visitor sees: screenshots, the diff, a page's verdict) > model (summary.json,
settings) > pacing (calls sized by time, bounded fan-out, waiting)."""
