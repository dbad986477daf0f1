"""REST API v2: one module per route family; `routes.build_v2_routes()` assembles them."""
