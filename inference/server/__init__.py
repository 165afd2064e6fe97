"""``captioneer serve``: a local HTTP transcription server with OpenAI-compatible routes.

* ``config``: the server's settings and its safety checks (loopback unless an API key is set);
* ``registry``: the served models, one inference worker process per model, and their request slots;
* ``errors``: OpenAI-shaped error responses;
* ``requests``: reading uploads (multipart or JSON) within the limits and turning them into audio + options;
* ``events``: server-sent events (``transcript.text.delta`` / ``partial`` / ``done``);
* ``routes`` and ``live``: the HTTP handlers; ``app``: the Starlette application; ``run``: uvicorn.
"""
