"""The grader's vocabulary, imported by every other part and importing none of them: cases, checks, errors,
text cleaning, exercise metadata, the report model and its JSON Schema."""
