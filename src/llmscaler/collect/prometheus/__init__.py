"""The Prometheus metrics source: the query registry, the answers and their fold into readings."""
