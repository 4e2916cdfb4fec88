"""Reading Prometheus text exposition pages: the lines, the page, the parser."""
