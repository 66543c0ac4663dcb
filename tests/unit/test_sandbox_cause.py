"""Why bubblewrap cannot start, named from the machine's facts: one message per cause, each
with the fix that works there (a pure function, tested on each cause)."""

from __future__ import annotations

import pytest

from kernel.isolation.sandbox import Facts, cause

_DENIED = "bwrap: setting up uid map: Permission denied"


@pytest.mark.parametrize(
    ("facts", "named", "fix"),
    [
        (Facts(installed=False), "is not installed", "apt-get install bubblewrap"),
        (
            Facts(said="bwrap: No permissions to creating new namespace", max_user_namespaces=0),
            "user.max_user_namespaces = 0",
            "sysctl -w user.max_user_namespaces=15000",
        ),
        (
            Facts(said=_DENIED, unprivileged_userns_clone=0),
            "kernel.unprivileged_userns_clone = 0",
            "sysctl -w kernel.unprivileged_userns_clone=1",
        ),
        (
            Facts(said=_DENIED, apparmor_restrict=1, max_user_namespaces=63000),
            "AppArmor restricts unprivileged user namespaces",
            "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0",
        ),
        (
            Facts(
                said="bwrap: Creating new namespace failed: Operation not permitted",
                container="docker",
            ),
            "docker container",
            "--security-opt seccomp=unconfined",
        ),
        (
            Facts(said="bwrap: setuid bwrap refused --unshare-user", setuid=True),
            "setuid root",
            "enable user namespaces",
        ),
        (Facts(said="bwrap: something else"), "could not start a sandbox", 'sandbox = "off"'),
    ],
)
def test_each_cause_is_named_with_its_fix(facts: Facts, named: str, fix: str) -> None:
    said = cause(facts)
    assert named in said and fix in said
    assert 'sandbox = "off"' in said
    assert facts.said in said  # bubblewrap's own words are quoted


def test_apparmor_names_the_profile_that_allows_bubblewrap_alone() -> None:
    said = cause(Facts(said=_DENIED, apparmor_restrict=1))
    assert "/etc/apparmor.d/bwrap" in said and "userns," in said


def test_root_is_not_blamed_on_restrictions_that_bind_unprivileged_users() -> None:
    # root needs no unprivileged user namespace: the AppArmor switch is not its cause
    said = cause(Facts(said="bwrap: odd", root=True, apparmor_restrict=1))
    assert "AppArmor" not in said and "bwrap: odd" in said


def test_a_container_is_not_blamed_for_a_missing_file() -> None:
    said = cause(
        Facts(said="bwrap: execvp /x/python: No such file or directory", container="docker")
    )
    assert "container" not in said
