"""The service shells: Twisted-side owners of domain state (timers, Deferreds, persistence)."""
