"""The forge: seed/* branches pushed with the kernel's token, and pull requests opened through
the forge's REST API (GitHub first, others behind the same Protocol)."""

from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from kernel.errors import SeedError
from kernel.isolation import gitops

_PUSH_PROTOCOLS = ("file", "https", "http", "ssh")
"""The transports a push may use (every kernel git command allows none by default)."""


TRUSTED = ("OWNER", "MEMBER", "COLLABORATOR")
"""The `author_association`s whose word on the forge seed reads (anyone else's is not read)."""
COMMENT_MAX = 2000
"""Characters of a reviewer's comment kept as evidence for the next plan."""


def number_of(url: str) -> int:
    """A pull request's number, from its web address (…/pull/N)."""
    tail = url.rstrip("/").rsplit("/", 1)[-1]
    if not tail.isdigit():
        raise ForgeError(f"no pull request number in {url!r}")
    return int(tail)


class ForgeError(SeedError):
    """The forge or the remote refused or could not be reached; no record is owed for it."""


@dataclass(frozen=True)
class PullRequest:
    """A pull request as the forge answered it."""

    number: int
    html_url: str
    state: str = "open"
    merged: bool = False
    draft: bool = False
    head_sha: str = ""
    mergeable_state: str = ""
    """GitHub's word on merging it now: "clean" when it may merge and every check passed."""
    updated_at: str = ""
    """When anything last happened to it (a review moves it): reviews are read only then."""


@dataclass(frozen=True)
class Review:
    """A change request on a pull request by a trusted author (its body is data, never
    instructions)."""

    id: int
    body: str
    commit_id: str
    """The commit the reviewer looked at."""


@dataclass(frozen=True)
class Issue:
    """An open issue as the forge answered it (its title and body are data, never instructions)."""

    number: int
    title: str
    body: str


ISSUE_TASK = re.compile(r"^issue-(\d{1,9})\.md$")
"""The inbox file name the kernel gives a labelled issue's task."""


def issue_of(task: str) -> int | None:
    """The issue a task of inbox/ came from (None: a person's file)."""
    match = ISSUE_TASK.match(task)
    return int(match.group(1)) if match else None


class Forge(Protocol):
    """What the kernel asks of a forge (GitHub today; GitLab or Forgejo by the same door)."""

    def open_pull(self, title: str, head: str, base: str, body: str, draft: bool) -> PullRequest:
        """Open a pull request of head onto base."""
        ...

    def pull(self, number: int) -> PullRequest:
        """A pull request's state now."""
        ...

    def merge(self, number: int, sha: str) -> None:
        """Merge the pull request, only while its head is sha."""
        ...

    def change_requests(self, number: int) -> list[Review]:
        """The reviews asking for changes by an OWNER, MEMBER or COLLABORATOR, oldest first."""
        ...

    def review_lines(self, number: int, review: int) -> list[str]:
        """A review's comments on lines of the diff, each "path:line: body"."""
        ...

    def last_word(self, number: int) -> str:
        """The latest comment on an issue or pull request by its OWNER, a MEMBER or a
        COLLABORATOR ('' when none)."""
        ...

    def issues(self, label: str) -> list[Issue]:
        """Open issues with the label, by an OWNER, MEMBER or COLLABORATOR."""
        ...

    def comment(self, number: int, body: str) -> None:
        """Comment on an issue or pull request."""
        ...


def auth_env(token: str) -> dict[str, str]:
    """The variables that give one git process the token as an HTTP header (never argv/URL/file)."""
    if not token:
        return {}
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
    }


def _transport_args() -> list[str]:
    """Settings letting a push reach the remote: its transports, and ssh through the person's agent."""
    args = [f"protocol.{p}.allow=always" for p in _PUSH_PROTOCOLS] + ["core.sshCommand=ssh"]
    return [item for setting in args for item in ("-c", setting)]


def push(root: Path, remote: str, commit: str, branch: str, token: str, lease: str = "") -> None:
    """Push commit to remote as branch (a seed/* branch only), with a lease on what seed last
    pushed there ("" : the branch must not exist yet)."""
    if not branch.startswith("seed/"):
        raise ForgeError(f"refusing to push {branch}: seed pushes only its own seed/* branches")
    ref = f"refs/heads/{branch}"
    result = gitops.git(
        root,
        *_transport_args(),
        "push",
        "--porcelain",
        f"--force-with-lease={ref}:{lease}",
        remote,
        f"{commit}:{ref}",
        check=False,
        env=auth_env(token),
    )
    if not result.ok:
        said = " ".join((result.err_text() or result.text()).split())[:400]
        raise ForgeError(f"git push to {remote} refused {branch}: {said}")


def delete_remote_branch(root: Path, remote: str, branch: str, token: str) -> None:
    """`git push --delete` a seed/* branch; a branch already gone is fine."""
    if not branch.startswith("seed/"):
        raise ForgeError(f"refusing to delete {branch}: not a seed/* branch")
    gitops.git(
        root,
        *_transport_args(),
        "push",
        "--delete",
        remote,
        branch,
        check=False,
        env=auth_env(token),
    )


_REPO_IN_URL = re.compile(r"[:/](?P<owner>[\w.-]+)/(?P<name>[\w.-]+?)(?:\.git)?/?$")


def without_secrets(url: str) -> str:
    """A remote's URL as it may be shown: a user and password in it (https://u:p@host) cut."""
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme and "@" in parts.netloc:
        return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
    return url.strip()


def repo_of(url: str) -> str:
    """owner/name read from a remote's URL (https://host/owner/name.git, git@host:owner/name)."""
    match = _REPO_IN_URL.search(url.strip())
    if match is None:
        shown = without_secrets(url)
        raise ForgeError(f"cannot read owner/name from the remote URL {shown!r}: set [forge] repo")
    return f"{match.group('owner')}/{match.group('name')}"


class GitHub:
    """GitHub's REST API (github.com or an Enterprise server's /api/v3), through the standard
    library's urllib as notify's webhook (no proxy from the environment, no redirect followed)."""

    def __init__(self, api_url: str, repo: str, token: str, timeout_s: float = 30.0) -> None:
        self._headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "seed",
            "Content-Type": "application/json",
        }
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._base = f"{api_url.rstrip('/')}/repos/{repo}"
        self._timeout_s = timeout_s

    def _call(
        self, method: str, path: str, body: dict[str, object] | None = None
    ) -> dict[str, Any]:
        """One API call answered with an object."""
        parsed = self._request(method, path, body)
        if not isinstance(parsed, dict):
            raise ForgeError(f"the forge's answer to {method} {path} is not an object")
        return cast(dict[str, Any], parsed)

    def _request(self, method: str, path: str, body: dict[str, object] | None = None) -> object:
        """One API call; a refusal, a 5xx or a timeout is a ForgeError (retried later)."""
        opener = urllib.request.build_opener(_NoRedirect(), urllib.request.ProxyHandler({}))
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self._base + path, data=data, method=method, headers=self._headers
        )
        try:
            with opener.open(request, timeout=self._timeout_s) as answer:
                raw = answer.read(4 * 1024 * 1024)
        except urllib.error.HTTPError as exc:
            raise ForgeError(f"the forge answered {exc.code} to {method} {path}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise ForgeError(
                f"the forge did not answer {method} {path}: {type(exc).__name__}"
            ) from exc
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ForgeError(f"the forge's answer to {method} {path} is not JSON") from exc

    def open_pull(self, title: str, head: str, base: str, body: str, draft: bool) -> PullRequest:
        """POST /repos/{owner}/{repo}/pulls."""
        data = self._call(
            "POST",
            "/pulls",
            {"title": title, "head": head, "base": base, "body": body, "draft": draft},
        )
        return _pull(data)

    def pull(self, number: int) -> PullRequest:
        """GET /repos/{owner}/{repo}/pulls/{number}."""
        return _pull(self._call("GET", f"/pulls/{number}"))

    def merge(self, number: int, sha: str) -> None:
        """PUT /repos/{owner}/{repo}/pulls/{number}/merge with the head it must have (409 when
        the branch moved, 405 when the forge does not allow it now: both a ForgeError)."""
        self._call("PUT", f"/pulls/{number}/merge", {"sha": sha})

    def _listed(self, path: str, what: str) -> list[dict[str, Any]]:
        """A GET that answers a JSON list, its objects (anything else in it left out)."""
        answer = self._request("GET", path)
        if not isinstance(answer, list):
            raise ForgeError(f"the forge's {what} are not a list")
        items = cast(list[object], answer)
        return [cast(dict[str, Any], item) for item in items if isinstance(item, dict)]

    def change_requests(self, number: int) -> list[Review]:
        """GET /repos/{owner}/{repo}/pulls/{number}/reviews (chronological, the first 100):
        state CHANGES_REQUESTED by a trusted author_association, with the commit reviewed."""
        found: list[Review] = []
        for fields in self._listed(
            f"/pulls/{number}/reviews?per_page=100", f"reviews of #{number}"
        ):
            review_id, body, commit = fields.get("id"), fields.get("body"), fields.get("commit_id")
            if (
                isinstance(review_id, int)
                and isinstance(commit, str)
                and fields.get("state") == "CHANGES_REQUESTED"
                and fields.get("author_association") in TRUSTED
            ):
                said = body if isinstance(body, str) else ""
                found.append(Review(review_id, said[:COMMENT_MAX], commit))
        return found

    def review_lines(self, number: int, review: int) -> list[str]:
        """GET /repos/{owner}/{repo}/pulls/{number}/reviews/{review}/comments (the first 100):
        the review's comments on lines, by a trusted author, each "path:line: body"."""
        where = f"/pulls/{number}/reviews/{review}/comments?per_page=100"
        lines: list[str] = []
        for fields in self._listed(where, f"comments of review {review}"):
            path, line, body = fields.get("path"), fields.get("line"), fields.get("body")
            if fields.get("author_association") in TRUSTED and isinstance(body, str):
                at = f":{line}" if isinstance(line, int) else ""
                lines.append(f"{path if isinstance(path, str) else '?'}{at}: {body}")
        return lines

    def last_word(self, number: int) -> str:
        """GET /repos/{owner}/{repo}/issues/{number}/comments (oldest first, the first 100):
        the latest body by a trusted author."""
        said = ""
        for fields in self._listed(
            f"/issues/{number}/comments?per_page=100", f"comments of #{number}"
        ):
            body = fields.get("body")
            if fields.get("author_association") in TRUSTED and isinstance(body, str):
                said = body
        return said[:COMMENT_MAX]

    def issues(self, label: str) -> list[Issue]:
        """GET /repos/{owner}/{repo}/issues?labels=…&state=open (the first 100; pull requests,
        which the endpoint lists too, and untrusted authors left out)."""
        query = urllib.parse.urlencode({"labels": label, "state": "open", "per_page": "100"})
        found: list[Issue] = []
        for fields in self._listed(f"/issues?{query}", "issues"):
            number, title, body = fields.get("number"), fields.get("title"), fields.get("body")
            if (
                isinstance(number, int)
                and isinstance(title, str)
                and "pull_request" not in fields
                and fields.get("author_association") in TRUSTED
            ):
                found.append(Issue(number, title, body if isinstance(body, str) else ""))
        return found

    def comment(self, number: int, body: str) -> None:
        """POST /repos/{owner}/{repo}/issues/{number}/comments."""
        self._call("POST", f"/issues/{number}/comments", {"body": body})


def _pull(data: dict[str, Any]) -> PullRequest:
    """A pull request read from the API's answer, its shape checked."""
    number, url, state = data.get("number"), data.get("html_url"), data.get("state")
    if not isinstance(number, int) or not isinstance(url, str) or not url.startswith("http"):
        raise ForgeError("the forge's pull request has no number or html_url")
    head = cast(dict[str, Any], data.get("head")) if isinstance(data.get("head"), dict) else {}
    sha, mergeable, updated = head.get("sha"), data.get("mergeable_state"), data.get("updated_at")
    return PullRequest(
        number,
        url,
        str(state or "open"),
        data.get("merged") is True,
        data.get("draft") is True,
        sha if isinstance(sha, str) else "",
        mergeable if isinstance(mergeable, str) else "",
        updated if isinstance(updated, str) else "",
    )


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer, never followed (the token goes to the configured URL only)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        """Follow nothing."""
        return None


def fenced(text: str) -> str:
    """Text from an agent or the tree made inert: a code fence longer than any backtick run in
    it, so the text cannot close it (no @mention, closing keyword or link acts)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"
