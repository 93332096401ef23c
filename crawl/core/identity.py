"""Who the crawler says it is: the default User-Agent and the robots.txt product token.

Both the page fetcher and the robots.txt fetcher send it, so it lives below both.
"""

DEFAULT_USER_AGENT = "crawl/0.1 (+https://github.com/crawl/crawl; crawler contact)"
AGENT_TOKEN = "crawl"
