"""Policies: how a model is decided, each composed of estimators, a solver and its own memory."""
