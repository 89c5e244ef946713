"""The desk: the human-facing HTML pages of the reference backend, under `/desk/`.

A person signs in through a single-use link an operator minted, reviews what an agent asked for
(the backend's own parse of the stored manifest bytes, the server-side checks and the estimate)
and confirms or declines it. Nothing here is reachable with an API token. `session.py` holds
sign-in and sessions, `render.py` the escaping and page pieces, `pages.py` the routes, and
`person.py` a small HTTP client that acts exactly as a browser would (tests and demos).
"""
