"""The saturation estimators (WVA V1 percentages, V2 token capacities) and their memory."""
