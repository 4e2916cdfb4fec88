"""The main cycle for VariantAutoscalings: decide, actuate, and each VA's status and story."""
