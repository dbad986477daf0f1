"""The Abilities interface (`/wp-json/wp-abilities/v1`): discovery, categories and `/run` (`routes.py`), one
module per ability category, their shared context, shapes, validation and errors. `emulator.app.create_app`
serves `routes.abilities_routes(emulator)`; the background jobs behind the batch abilities are `emulator.jobs`."""
