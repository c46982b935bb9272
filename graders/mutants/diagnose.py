def diagnose(exercise, track, observations, results):
    return []
