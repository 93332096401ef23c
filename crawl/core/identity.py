"""Who the crawler says it is: the default User-Agent and the robots.txt product token.

Both the page fetcher and the robots.txt fetcher send it, so it lives below both.

The default names no one to contact: a site owner whose logs fill with
``crawl/0.1`` cannot reach whoever runs it. So ``crawl fetch`` and ``crawl
run`` say so once, on stderr, while it is in use (:func:`contact_warning`),
and tell how to set your own: ``--user-agent``, the ``CRAWL_USER_AGENT``
environment variable, or ``user-agent`` in a ``crawl run --config`` file.
The test suite and ``make demo`` set ``CRAWL_USER_AGENT`` (loopback only,
and still the product token ``crawl``, so robots.txt groups match alike).
"""

DEFAULT_USER_AGENT = "crawl/0.1 (+https://github.com/crawl/crawl; crawler contact)"
AGENT_TOKEN = "crawl"
USER_AGENT_ENV = "CRAWL_USER_AGENT"


def contact_warning(user_agent: str) -> str | None:
    """The one line to print when ``user_agent`` carries no contact of the operator's, else None."""
    if user_agent.strip() != DEFAULT_USER_AGENT:
        return None
    return (f"warning: no contact configured: the User-Agent is the placeholder {DEFAULT_USER_AGENT!r}; "
            f"name yourself with --user-agent 'NAME/1.0 (+https://your.site/bot; you@your.site)', "
            f"or {USER_AGENT_ENV}=... in the environment (crawl run: also user-agent in its --config file)")
