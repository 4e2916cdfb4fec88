"""A run's figures and the report: summary, table, plots, pages."""
