"""Rank 3: the compactor — the pure core's decisions applied to a session store with a summarizer —
and the shapes of its results and errors (``results``)."""
