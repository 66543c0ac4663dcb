"""A loopback double of GitHub's REST API (127.0.0.1 only): the calls seed makes, each checked
against the documented shape (docs.github.com/en/rest/pulls/pulls), answered as GitHub does."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

_CREATE_KEYS = {"title", "head", "base", "body", "draft"}


class ForgeDouble:
    """Pull requests kept in memory; `calls` lists every request as (method, path, body, headers)."""

    def __init__(self, repo: str = "team/project", fail: int = 0) -> None:
        self.repo = repo
        self.fail = fail
        """Answer this many requests with 500 first."""
        self.calls: list[tuple[str, str, dict[str, Any], dict[str, str]]] = []
        self.pulls: dict[int, dict[str, Any]] = {}
        self.comments: dict[int, list[dict[str, Any]]] = {}
        self.issues: dict[int, dict[str, Any]] = {}
        self.reviews: dict[int, list[dict[str, Any]]] = {}
        self.review_comments: dict[int, list[dict[str, Any]]] = {}
        """Each review's comments on lines of the diff, by review id."""
        self.errors: list[str] = []
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                double.answer(self, "POST")

            def do_GET(self) -> None:
                double.answer(self, "GET")

            def do_PUT(self) -> None:
                double.answer(self, "PUT")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()

    def answer(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        """One request: recorded, its shape checked, answered."""
        length = int(handler.headers.get("Content-Length") or 0)
        body: dict[str, Any] = json.loads(handler.rfile.read(length) or b"{}")
        headers = {k.lower(): v for k, v in handler.headers.items()}
        self.calls.append((method, handler.path, body, headers))
        if self.fail > 0:
            self.fail -= 1
            return self._send(handler, 500, {"message": "Server Error"})
        if headers.get("accept") != "application/vnd.github+json":
            self.errors.append(f"{method} {handler.path}: Accept is {headers.get('accept')}")
        prefix = f"/repos/{self.repo}/pulls"
        if method == "POST" and handler.path == prefix:
            if set(body) - _CREATE_KEYS or not {"title", "head", "base"} <= set(body):
                self.errors.append(f"POST pulls with keys {sorted(body)}")
                return self._send(handler, 422, {"message": "Validation Failed"})
            number = len(self.pulls) + 1
            pull = {
                "number": number,
                "html_url": f"https://github.example/{self.repo}/pull/{number}",
                "state": "open",
                "merged": False,
                "draft": bool(body.get("draft")),
                "mergeable_state": "unknown",  # GitHub computes it after the PR opens
                "head": {"ref": body["head"], "sha": ""},
                "base": {"ref": body["base"]},
                "body": body.get("body"),
                "title": body["title"],
                "updated_at": _moment(len(self.calls)),
            }
            self.pulls[number] = pull
            return self._send(handler, 201, pull)
        issues = f"/repos/{self.repo}/issues/"
        listed = f"/repos/{self.repo}/issues?"
        if method == "GET" and handler.path.startswith(listed):
            # GET /repos/{owner}/{repo}/issues?labels=a,b&state=open: issues and PRs, an array
            query = parse_qs(handler.path[len(listed) :])
            if query.get("state") != ["open"] or "labels" not in query:
                self.errors.append(f"issues listed with {query}")
            wanted = set(query.get("labels", [""])[0].split(","))
            found = [
                i
                for i in self.issues.values()
                if i["state"] == "open" and wanted <= {label["name"] for label in i["labels"]}
            ]
            return self._send(handler, 200, found)
        if method == "POST" and handler.path.startswith(issues):
            # POST /repos/{owner}/{repo}/issues/{issue_number}/comments {"body": ...}: 201
            number, _, rest = handler.path[len(issues) :].partition("/")
            if rest != "comments" or set(body) != {"body"} or not isinstance(body["body"], str):
                self.errors.append(f"POST {handler.path} with keys {sorted(body)}")
                return self._send(handler, 422, {"message": "Validation Failed"})
            comment = {"id": len(self.calls), "body": body["body"], "author_association": "OWNER"}
            self.comments.setdefault(int(number), []).append(comment)
            return self._send(handler, 201, comment)
        if method == "GET" and handler.path.startswith(issues):
            # GET /repos/{owner}/{repo}/issues/{issue_number}/comments: an array, oldest first
            number, _, rest = handler.path[len(issues) :].partition("/")
            if not number.isdigit() or rest.split("?")[0] != "comments":
                self.errors.append(f"unexpected call {method} {handler.path}")
            return self._send(handler, 200, self.comments.get(int(number or 0), []))
        if method == "PUT" and handler.path.startswith(prefix + "/"):
            return self._merge(handler, handler.path[len(prefix) + 1 :], body)
        if method == "GET" and handler.path.startswith(prefix + "/") and "/reviews" in handler.path:
            return self._reviews(handler, handler.path[len(prefix) + 1 :])
        if method == "GET" and handler.path.startswith(prefix + "/"):
            pull = self.pulls.get(int(handler.path.rsplit("/", 1)[1]))
            return self._send(handler, 200 if pull else 404, pull or {"message": "Not Found"})
        self.errors.append(f"unexpected call {method} {handler.path}")
        self._send(handler, 404, {"message": "Not Found"})

    def open_issue(self, number: int, title: str, body: str, association: str = "OWNER") -> None:
        """Someone opens an issue labelled `seed`."""
        self.issues[number] = {
            "number": number,
            "title": title,
            "body": body,
            "state": "open",
            "labels": [{"name": "seed"}],
            "user": {"login": "someone"},
            "author_association": association,
            "html_url": f"https://github.example/{self.repo}/issues/{number}",
        }

    def _merge(self, handler: BaseHTTPRequestHandler, rest: str, body: dict[str, Any]) -> None:
        """PUT /repos/{owner}/{repo}/pulls/{n}/merge {sha?, merge_method?, commit_title?,
        commit_message?}: 200 merged, 405 not mergeable now, 409 when sha is not the head."""
        number, _, what = rest.partition("/")
        pull = self.pulls.get(int(number)) if number.isdigit() and what == "merge" else None
        keys = {"sha", "merge_method", "commit_title", "commit_message"}
        if pull is None or set(body) - keys:
            self.errors.append(f"PUT pulls/{rest} with keys {sorted(body)}")
            return self._send(handler, 404 if pull is None else 422, {"message": "Not Found"})
        if "sha" in body and body["sha"] != pull["head"]["sha"]:
            return self._send(handler, 409, {"message": "Head branch was modified."})
        if pull["state"] != "open" or pull["mergeable_state"] != "clean" or pull["draft"]:
            return self._send(handler, 405, {"message": "Pull Request is not mergeable"})
        self.merge(int(number))
        self._send(handler, 200, {"sha": "f" * 40, "merged": True, "message": "merged"})

    def _reviews(self, handler: BaseHTTPRequestHandler, rest: str) -> None:
        """GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews?per_page=N (at most 100): an
        array in chronological order (docs.github.com/en/rest/pulls/reviews)."""
        number, _, query = rest.partition("/reviews")
        which, _, query = query.partition("?")
        per_page = parse_qs(query).get("per_page", ["30"])[0]
        lines = which.removeprefix("/").removesuffix("/comments")
        shape = which == "" or (which.endswith("/comments") and lines.isdigit())
        if not number.isdigit() or not shape or int(per_page) > 100:
            self.errors.append(f"GET pulls/{rest}")
            return self._send(handler, 404, {"message": "Not Found"})
        if int(number) not in self.pulls:
            return self._send(handler, 404, {"message": "Not Found"})
        if which:
            # .../reviews/{review_id}/comments: the review's comments on lines of the diff
            found = self.review_comments.get(int(lines), [])
            return self._send(handler, 200, found[: int(per_page)])
        return self._send(handler, 200, self.reviews.get(int(number), [])[: int(per_page)])

    def review(
        self,
        number: int,
        body: str,
        commit_id: str,
        association: str = "COLLABORATOR",
        state: str = "CHANGES_REQUESTED",
        lines: dict[str, str] | None = None,
    ) -> None:
        """Someone submits a review of the pull request on commit_id, with comments on lines
        ({"path:line": body}); its updated_at moves."""
        reviews = self.reviews.setdefault(number, [])
        review_id = 80 + sum(len(r) for r in self.reviews.values())
        self.review_comments[review_id] = [
            {
                "id": 900 + n,
                "pull_request_review_id": review_id,
                "path": at.split(":")[0],
                "line": int(at.split(":")[1]),
                "side": "RIGHT",
                "commit_id": commit_id,
                "body": text,
                "user": {"login": "reviewer", "id": 7, "type": "User"},
                "author_association": association,
            }
            for n, (at, text) in enumerate((lines or {}).items())
        ]
        reviews.append(
            {
                "id": review_id,
                "node_id": f"PRR_{review_id}",
                "user": {"login": "reviewer", "id": 7, "type": "User"},
                "body": body,
                "state": state,
                "html_url": f"https://github.example/{self.repo}/pull/{number}#pullrequestreview-{review_id}",
                "pull_request_url": f"{self.url}/repos/{self.repo}/pulls/{number}",
                "author_association": association,
                "submitted_at": _moment(review_id),
                "commit_id": commit_id,
            }
        )
        self.pulls[number]["updated_at"] = _moment(review_id)

    def checks(self, number: int, state: str, sha: str) -> None:
        """The forge's checks of the PR ran: its mergeable_state, and the head they ran on."""
        self.pulls[number]["mergeable_state"] = state
        self.pulls[number]["head"]["sha"] = sha

    def merge(self, number: int) -> None:
        """A person merges the pull request on the forge."""
        self.pulls[number].update(state="closed", merged=True, merged_at="2026-12-07T12:00:00Z")

    def close_pull(self, number: int, comment: str = "", association: str = "MEMBER") -> None:
        """A person closes the pull request unmerged, after a comment."""
        if comment:
            self.comments.setdefault(number, []).append(
                {
                    "id": 100 + len(self.comments.get(number, [])),
                    "body": comment,
                    "user": {"login": "reviewer"},
                    "author_association": association,
                    "created_at": "2026-12-07T12:00:00Z",
                    "html_url": f"https://github.example/{self.repo}/pull/{number}#issuecomment-1",
                }
            )
        self.pulls[number].update(state="closed", merged=False)

    def _send(
        self, handler: BaseHTTPRequestHandler, code: int, data: dict[str, Any] | list[Any]
    ) -> None:
        raw = json.dumps(data).encode()
        handler.send_response(code)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(raw)))
        handler.end_headers()
        handler.wfile.write(raw)


def _moment(n: int) -> str:
    """A distinct ISO 8601 UTC moment for the n-th thing that happened."""
    return f"2026-12-07T{10 + n // 3600 % 10:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z"
