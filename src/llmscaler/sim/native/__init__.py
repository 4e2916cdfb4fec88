"""The simulator's replica engine compiled to a C extension (mypyc), where it has been built."""
