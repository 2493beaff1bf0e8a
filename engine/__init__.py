"""onsale engine: seats, holds and charges as atomic Redis Lua transitions."""
