"""REST API v2: one module per route family; `build_routes()` assembles them."""
