"""Kaito's LLMAutoScaler: its realtime and cron scalers, one scale target each."""
