"""Media URLs a backend fetches on a client's say-so (models.yml `media:`; SECURITY.md "Media URLs").

vLLM 0.32 downloads every http(s) URL of an image_url / video_url / audio_url part itself, from anywhere,
unless `--allowed-media-domains` lists hosts; and an EMPTY list also means "anywhere"
(vllm/multimodal/media/connector.py `_assert_url_in_allowed_media_domains` checks only a non-empty one;
the flag takes one value or more). So every backend gets the flag:

- with `media: {domains: [...]}`: those hosts, and VLLM_MEDIA_URL_ALLOW_REDIRECTS=0 (vLLM checks the
  first URL's host only: a listed host's redirect could lead anywhere);
- without: one host no URL can name, NO_MEDIA_DOMAIN. urllib3 lowercases an http(s) URL's host before
  vLLM compares it, so a name with capitals never matches, and `.invalid` (RFC 6761) never resolves
  besides: every media URL is refused before any connection. data: URLs (media sent inline) still work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .state import Model, State

FLAG = "--allowed-media-domains"
NO_MEDIA_DOMAIN = "NO-MEDIA-URLS.invalid"
REDIRECTS_ENV = "VLLM_MEDIA_URL_ALLOW_REDIRECTS"


def media_flags(domains: tuple[str, ...]) -> tuple[str, ...]:
    """The flag every backend's command gets."""
    return (FLAG, *(domains or (NO_MEDIA_DOMAIN,)))


def media_env(domains: tuple[str, ...], env: dict[str, str]) -> dict[str, str]:
    """The model's environment, with redirects of media URLs off when hosts are listed (a value the
    model's own `env:` sets is kept: media_warnings says what it does)."""
    if not domains or REDIRECTS_ENV in env:
        return env
    return dict(sorted({**env, REDIRECTS_ENV: "0"}.items()))


def media_warnings(name: str, domains: tuple[str, ...], backend_internet: bool, env: dict[str, str]) -> list[str]:
    """What listing media hosts exposes: the backend connects where their DNS points."""
    if not domains:
        return []
    warned = []
    if backend_internet:
        warned.append(
            f"{name}: media.domains lets any key holder make this backend fetch URLs on "
            f"{', '.join(domains)} while it can reach the internet and this host's networks "
            "(gateway.backend_internet: true): whoever runs those names' DNS decides where it connects "
            "(cloud metadata, services on the host). List only hosts you control, or send media inline "
            "(data: URLs) and drop media.domains"
        )
    if env.get(REDIRECTS_ENV, "0").strip() not in ("0", ""):
        warned.append(
            f"{name}: env {REDIRECTS_ENV}={env[REDIRECTS_ENV]} lets a listed media host redirect the "
            "backend anywhere (vLLM checks only the first URL's host); remove it"
        )
    return warned


def warn(s: State, m: Model) -> None:
    plan = m.backends[-1]
    s.warnings += media_warnings(m.name, plan.media_domains, s.file.gateway.backend_internet, plan.env)
