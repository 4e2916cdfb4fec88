"""The pod-scraping metrics source: pages read from the pods, windows kept locally."""
