"""Kaito's LLMAutoScaler objects served beside VariantAutoscalings."""
