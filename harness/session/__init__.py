"""The host end of the worker pipe: :class:`channel.WorkerSession` (frames, deadlines, restarts) and the
:class:`candidate.Candidate` proxy the hidden suites call (Case -> frames -> plain arrays)."""
