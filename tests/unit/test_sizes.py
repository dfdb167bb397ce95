import pytest

from generator.compile.load.sizes import is_auto, parse_size


@pytest.mark.parametrize(
    "text,value",
    [
        ("16K", 16384),
        ("16k", 16000),
        ("25.6k", 25600),
        ("1k", 1000),
        ("1K", 1024),
        ("2M", 2 * 2**20),
        ("2m", 2_000_000),
        ("1G", 2**30),
        ("8192", 8192),
        (8192, 8192),
        (" 4K ", 4096),
    ],
)
def test_sizes_follow_vllm(text, value):
    assert parse_size(text) == value


def test_decimals_with_binary_suffix_are_refused_with_a_hint():
    with pytest.raises(ValueError, match="did you mean 1.5k"):
        parse_size("1.5K")


@pytest.mark.parametrize("bad", ["lots", "16KB", "", "1e3", True])
def test_garbage_is_refused(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


def test_auto():
    assert is_auto("auto") and is_auto("-1") and not is_auto("16K")
