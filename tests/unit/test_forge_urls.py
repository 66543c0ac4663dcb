"""What a remote's URL shows of itself in status and errors: never its credentials."""

from __future__ import annotations

import pytest

from kernel.records import forge


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://x-access-token:ghp_s3cret@github.com/o/r.git", "https://github.com/o/r.git"),
        ("https://user@github.example/o/r", "https://github.example/o/r"),
        ("git@github.com:o/r.git", "git@github.com:o/r.git"),
        ("/srv/git/r.git", "/srv/git/r.git"),
    ],
)
def test_a_remote_url_is_shown_without_its_user_and_password(url: str, shown: str) -> None:
    assert forge.without_secrets(url) == shown


def test_an_unreadable_remote_url_is_named_without_its_password() -> None:
    with pytest.raises(forge.ForgeError) as raised:
        forge.repo_of("https://u:ghp_s3cret@host")
    assert "ghp_s3cret" not in str(raised.value) and "https://host" in str(raised.value)
