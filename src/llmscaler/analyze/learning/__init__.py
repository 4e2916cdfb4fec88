"""What the estimators learn over cycles: the Kalman tuner, rate forecasts, capacity knowledge."""
