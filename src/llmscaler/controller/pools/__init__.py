"""InferencePools and their endpoint pickers (EPP): the datastore, its watches, its sources."""
