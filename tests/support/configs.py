"""Configurations the engine tests run under: each analysis path, with and without zero."""

from __future__ import annotations

from llmscaler.config.resolved import Config, ModelConfig, SaturationConfig, ScaleToZeroConfig

PERCENTAGE = Config()
"""WVA's default: the percentage-based saturation analyzer."""
TOKEN = Config(default=ModelConfig(saturation=SaturationConfig(analyzer_name='saturation')))
"""The token-based saturation analyzer (WVA V2) with the cost-aware optimizer."""
ZERO_ON = Config(default=ModelConfig(scale_to_zero=ScaleToZeroConfig(enabled=True)))
TOKEN_ZERO_ON = Config(
    default=ModelConfig(
        saturation=SaturationConfig(analyzer_name='saturation'),
        scale_to_zero=ScaleToZeroConfig(enabled=True),
    )
)
