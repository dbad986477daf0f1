"""The rules of the night: the policy file, windows, the plan, rollout cohorts, the approval gate, and what the
dashboard's answers mean for each item."""
