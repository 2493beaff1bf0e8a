"""Read once at boot: the engine's settings from ONSALE_* variables and the log format."""
