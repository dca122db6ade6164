"""DC-PDD reference token-frequency tables: format and cache, counting, sources, estimates."""
