"""The scale-from-zero loop: wake the cheapest variant of an idle model when requests queue."""
