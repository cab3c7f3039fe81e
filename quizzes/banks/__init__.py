"""The built-in quiz banks, one YAML file per course section (data only; see ``quizzes.bank``)."""
