"""The queueing estimators: a replica's performance model, its M/M/1/K queue, the
largest rate within latency targets, and the SLO analyzer built on them."""
