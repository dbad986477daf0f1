"""The guard's room: the fleet's side of Fleet Guard, the WordPress plugin kept in `guard/plugin/fleet-guard/`
(PHP). Signing (Ed25519), the keys in the home's `.env` or a Prefect Secret block, the typed async client of the
guard on each site, and the zip with the public keys built in. The guard is another service than the dashboard:
its HTTP lives here, not in dashboard/."""
