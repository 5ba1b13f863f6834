"""What a run leaves behind: capacity records, the report, its plots."""
