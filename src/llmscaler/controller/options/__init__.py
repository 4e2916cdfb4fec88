"""The options of `llmscaler run`: their table, value formats, layers and resolution."""
