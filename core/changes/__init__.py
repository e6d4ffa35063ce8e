"""What a write changes, read from the server before it runs: its plan (the paths it acts
on and their state), its preview, and the record kept so it can be undone."""
