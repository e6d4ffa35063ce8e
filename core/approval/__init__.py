"""The approval contract: the payload a paused thread shows, the decisions that answer it,
the rules and grants that decide without a person, and the model's questions to the person."""
