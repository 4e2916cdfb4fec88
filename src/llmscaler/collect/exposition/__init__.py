"""Reading Prometheus text exposition pages: the wanted families of a `/metrics` page, fast."""
