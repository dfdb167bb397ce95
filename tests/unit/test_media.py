"""models.yml `media:`: by default no backend fetches a media URL a client names; listed hosts only,
without redirects, when models.yml says so (generator/compile/load/media.py, SECURITY.md "Media URLs")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from urllib3.util import parse_url

from generator.compile.load.media import NO_MEDIA_DOMAIN, REDIRECTS_ENV

CPU = "  gpus: []\n  command: vllm serve o/{name} --max-model-len 8K\n"


def model(name: str = "m", extra: str = "") -> str:
    return f"{name}:\n" + CPU.format(name=name) + extra


def test_by_default_every_backend_refuses_every_media_url(plan):
    p = plan(model("a") + model("b"))
    for m in p.models:
        assert m.flag_args[-2:] == ("--allowed-media-domains", NO_MEDIA_DOMAIN) and m.media_domains == ()
        assert REDIRECTS_ENV not in m.env
    assert not any("media" in w for w in p.warnings)


def test_listed_hosts_are_passed_to_vllm_and_redirects_turned_off(plan):
    (m,) = plan(model(extra="  media: {domains: [images.example.com, 10.1.2.3]}\n")).models
    assert m.flag_args[-3:] == ("--allowed-media-domains", "images.example.com", "10.1.2.3")
    assert m.media_domains == ("images.example.com", "10.1.2.3") and m.env[REDIRECTS_ENV] == "0"


def test_defaults_media_applies_to_every_model_and_a_models_own_replaces_it(plan):
    p = plan(
        "defaults:\n  media: {domains: [cdn.example.com]}\n"
        + model("a")
        + model("b", "  media: {domains: []}\n")
        + model("c", "  media: {domains: [img.example.org]}\n")
    )
    got = {m.name: m.media_domains for m in p.models}
    assert got == {"a": ("cdn.example.com",), "b": (), "c": ("img.example.org",)}
    assert p.models[1].flag_args[-1] == NO_MEDIA_DOMAIN


@pytest.mark.parametrize(
    "domain,message",
    [
        (
            "https://images.example.com/cats",
            "'https://images.example.com/cats': write the host only ('images.example.com')",
        ),
        ("*.example.com", "vLLM compares host names exactly (no wildcards): list each host"),
        ("Images.Example.com", "write it in lowercase ('images.example.com')"),
        ("localhost", "is the backend's own host or a link-local (cloud metadata) address"),
        ("127.0.0.1", "is the backend's own host or a link-local (cloud metadata) address"),
        ("169.254.169.254", "is the backend's own host or a link-local (cloud metadata) address"),
        ("0.0.0.0", "is the backend's own host"),
        ("images..example.com", "is not a host name such as images.example.com"),
        ("images.example.com:8080", "is not a host name such as images.example.com"),
        (7, "expected a host name such as images.example.com"),
    ],
)
def test_a_domain_vllm_would_never_match_or_that_points_back_at_the_host_is_refused(problems, domain, message):
    (msg,) = problems(model(extra=f"  media: {{domains: [{domain!r}]}}\n".replace("'", '"')))
    assert "m.media.domains.0" in msg and message in msg, msg


def test_unknown_media_fields_get_a_suggestion(problems):
    (msg,) = problems(model(extra="  media: {domain: [images.example.com]}\n"))
    assert "m.media.domain" in msg and "did you mean 'domains'?" in msg
    (msg,) = problems("defaults:\n  media: {domians: []}\n" + model())
    assert "defaults.media.domians" in msg and "did you mean 'domains'?" in msg


@pytest.mark.parametrize("flag", ["--allowed-media-domains images.example.com", "--allowed-local-media-path /data"])
def test_the_media_flags_in_a_command_are_refused_pointing_at_models_yml(problems, flag):
    (msg,) = problems(f"m:\n  gpus: []\n  command: vllm serve o/m --max-model-len 8K {flag}\n")
    assert f"m.command {flag.split()[0]}" in msg and "media: {domains: [" in msg, msg


def test_listed_hosts_with_backend_internet_warn_and_without_it_do_not(plan):
    extra = "  media: {domains: [images.example.com]}\n"
    (warning,) = [w for w in plan(model(extra=extra)).warnings if "media" in w]
    assert warning.startswith("m: media.domains lets any key holder make this backend fetch URLs on images.example.com")
    assert "gateway.backend_internet: true" in warning and "cloud metadata" in warning
    assert not [w for w in plan("gateway: {backend_internet: false}\n" + model(extra=extra)).warnings if "media" in w]


def test_a_models_env_that_turns_redirects_on_is_kept_and_warned_about(plan):
    p = plan(
        "gateway: {backend_internet: false}\n"
        + model(extra=f"  media: {{domains: [images.example.com]}}\n  env: {{{REDIRECTS_ENV}: '1'}}\n")
    )
    assert p.models[0].env[REDIRECTS_ENV] == "1"
    (warning,) = p.warnings
    assert "redirect the backend anywhere" in warning


@settings(max_examples=300, deadline=None)
@given(
    scheme=st.sampled_from(["http", "https", "HTTP", "Https"]),
    host=st.sampled_from([NO_MEDIA_DOMAIN, NO_MEDIA_DOMAIN.lower(), NO_MEDIA_DOMAIN.swapcase()])
    | st.text(st.characters(codec="ascii", exclude_characters="/?#@[]"), min_size=1, max_size=30),
    port=st.none() | st.integers(1, 65535),
)
def test_no_http_url_has_the_placeholder_as_its_host(scheme, host, port):
    """vLLM compares urllib3's parse_url(url).hostname with the list: for http(s) urllib3 lowercases the host,
    so the placeholder (capitals) never matches and the URL is refused before any connection."""
    url = f"{scheme}://{host}" + (f":{port}" if port else "") + "/x.png"
    try:
        parsed = parse_url(url)
    except Exception:  # noqa: BLE001 - a URL urllib3 cannot parse is refused by vLLM as well
        return
    assert parsed.hostname != NO_MEDIA_DOMAIN
