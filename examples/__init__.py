"""Recorded sessions `fsagent regress` replays; installed as the fsagent_examples package."""
