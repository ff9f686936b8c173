"""The report server's models, one module per resource (as ``routes/`` and ``queries/``).

Each module holds its resource's query parameters and its records. A record is what the
query returns and, as it is, the API's response model: the routes add envelopes (a page and
its cursor, several queries side by side), never a second class with the same fields. An
``...Out`` name marks such an envelope, or a view that exists only in the reply.
"""
