"""The CrossGuard policy pack (run by `pulumi up --policy-pack policy`); address_space.py is plain Python."""
