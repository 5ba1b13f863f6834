"""Command-line helpers shared by every room's entry points (standard library only, the lowest floor)."""
