"""The HTTP service (`fsagent serve`): the chat API, the admin API and the inbox page, over the
same core the terminal drives (`ThreadSession` and its events).

    POST /api/threads/{name}/messages   {"text"}: a turn, streamed as server-sent events
    GET  /api/threads                    every thread: status, message count, pending calls
    GET  /api/threads/{name}             one thread: its messages and pending calls (previews)
    GET  /api/admin/approvals            every waiting thread: calls, previews, the request;
                                         ?known=NAME:ETAG,... only what changed, and what
                                         is gone; 304 to If-None-Match (web/listing.py)
    POST /api/admin/approvals/{name}     decide the batch and resume: {"status", "thread_id",
                                         "answer", "run", "results"} (web/outcomes.py), or the
                                         run as events (Accept: text/event-stream)
    POST /api/admin/approvals/{name}/preview  a call's whole preview, paged, or an edit's
    GET  /api/admin/inbox                what waits, as events whenever it changes
    GET  /openapi.json                   the schema of all this
    GET  /healthz                        LM Studio and the MCP server reachable?
    GET  /                               the inbox page (web/static)

Whether a thread waits is read from its checkpoint's interrupts every time, never from a
queue of our own, so what the terminal decided, or a restart lost, cannot disagree with it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from fastapi import Depends, FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware

from core.approval.approval import ApprovalCall, tool_schema
from core.approval.decisions import (
    AnswerValue,
    DecisionError,
    ResumeValue,
    answer_value,
    check_form,
    resume_json,
    resume_value,
)
from core.approval.questions import QUESTION_KIND, Pause, QuestionCall
from core.changes.binding import Bound, Foreign, Stale, Unbound
from core.opening import OtherRoots, recover
from core.session import ThreadSession
from core.text import format_call
from core.threads.audit import now
from core.threads.events import Decision
from core.threads.thread_names import ThreadNameError, escaped, follows_rule, name_problem
from core.threads.threads import (
    WAITING,
    WAITING_ANSWER,
    Graph,
    ThreadView,
    all_views,
    cannot_resume_message,
    pending_approval,
    waiting_views,
)
from store.base import Store
from web import listing, payloads
from web.access_log import AccessLog
from web.auth import Access, Guard, Refused, Tokens, refusal
from web.bodies import only_keys, read_json
from web.events import Frame, decision_frame, run_frames
from web.inbox import inbox_events
from web.outcomes import outcome
from web.preview_cache import PreviewCache
from web.runs import Run, Runs

STATIC = Path(__file__).resolve().parent / "static"
# The page loads nothing from anywhere else and may not be framed by another page.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}
NO_STORE = {"Cache-Control": "no-store"}
PREVIEW_PAGE = 2000  # lines of a whole preview per request


@dataclass
class Service:
    """What the app serves, opened and closed by the command line (cli/serve.py)."""

    store: Store
    graph: Graph
    # The session on a thread, for one request: core.opening.open_thread, which checks the
    # name (core.threads.thread_names) and the roots, as for every other way in.
    session: Callable[[str], Awaitable[ThreadSession]]
    health: Callable[[], Awaitable[dict[str, str | None]]]  # part -> why it is down, or None
    verbose: bool = False


def create_app(service: Service, access: Access) -> FastAPI:
    runs = Runs(service.store, verbose=service.verbose)
    # Diffs by preview_id, shared by the listing, a thread's view and the preview endpoint.
    previews = PreviewCache()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await runs.shutdown("the server is stopping")

    # The schema, but no /docs: FastAPI's pages load their scripts from a CDN, and the page
    # must work offline.
    app = FastAPI(
        title="fsagent",
        summary="A terminal agent's threads, approvals and questions over HTTP",
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
        lifespan=lifespan,
    )
    app.state.runs = runs
    app.state.previews = previews
    app.state.service = service
    tokens = Tokens(access)
    chat = [Depends(tokens.chat)]
    admin = [Depends(tokens.admin)]

    @app.exception_handler(Refused)
    async def refused(request: Request, error: Refused) -> Response:
        return refusal(error)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> Response:
        # Starlette's own (no such route, method not allowed), in the API's one shape.
        return JSONResponse({"error": str(error.detail)}, error.status_code, error.headers)

    # -- the page and health -------------------------------------------------------------------

    @app.get("/", include_in_schema=False)
    async def page() -> Response:
        return FileResponse(STATIC / "index.html", headers=PAGE_HEADERS)

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/healthz", dependencies=chat)
    async def healthz() -> Response:
        problems = await service.health()
        parts = {name: {"ok": why is None, "problem": why} for name, why in problems.items()}
        ok = all(problem is None for problem in problems.values())
        return JSONResponse({"ok": ok, **parts}, 200 if ok else 503, headers=NO_STORE)

    # -- chat ------------------------------------------------------------------------------------

    @app.get("/api/threads", dependencies=chat)
    async def list_threads() -> Response:
        views = await all_views(service.store, service.graph)
        return JSONResponse({"threads": [payloads.summary(v) for v in views]}, headers=NO_STORE)

    @app.get("/api/threads/{name}", dependencies=chat)
    async def show_thread(name: str) -> Response:
        session = await opened(service, name)
        # Read before the view: a run that ended before it was read has closed the thread.
        running = session.thread in runs.active
        view = await session.view()
        if view is None:
            raise Refused(404, f"no thread named '{escaped(name)}'")
        shown = await payloads.detail(session, view, previews)
        # Who decided each call and when, from the audit: the chat view tells the story.
        decisions = [
            {"call_id": r.call_id, "tool": r.tool, "decision": r.decision, "by": r.by,
             "time": r.time, "reason": r.reason}
            for r in await service.store.audit_rows(session.thread)
        ]  # fmt: skip
        answer = {**shown, "running": running, "decisions": decisions}
        return JSONResponse(answer, headers=NO_STORE)

    @app.post("/api/threads/{name}/messages", dependencies=chat)
    async def post_message(name: str, request: Request) -> Response:
        name = (await opened(service, name)).thread
        body = only_keys(await read_json(request), {"text"}, "a message")
        text = body.get("text")
        if not isinstance(text, str) or not text.strip():
            raise Refused(400, 'a message needs "text", a non-empty string')
        claim = await runs.claim(name)
        try:
            session = await opened(service, name)
            view = await session.view()
            check_takes_message(view)
        except BaseException:
            await claim.release()
            raise
        run = runs.start(claim, session, turn_frames(session, view, text.strip(), previews))
        return stream(run)

    # -- admin -----------------------------------------------------------------------------------

    @app.get("/api/admin/approvals", dependencies=admin)
    async def list_approvals(request: Request, known: str | None = None) -> Response:
        """Every waiting thread, each with its etag; with `known` (NAME:ETAG,...) only those
        whose etag differs, and which are gone; 304 for an If-None-Match that names this
        listing (web/listing.py)."""
        began = time.perf_counter()
        try:
            held = None if known is None else listing.parse_known(known)
        except listing.BadKnown as error:
            raise Refused(400, str(error)) from None
        views = await waiting_views(service.store, service.graph)
        found = []
        for view in views:
            try:
                session = await opened(service, view.name)
            except Refused:
                continue  # started with other roots: this server cannot act on it
            found.append(listing.with_etag(await payloads.waiting(session, view, previews)))
        answer = listing.changes(found, held)
        tag = listing.listing_etag(answer["threads"])
        headers = {**NO_STORE, "ETag": tag, "Server-Timing": server_timing(began, previews)}
        if listing.matches(request.headers.get("if-none-match"), tag):
            return Response(status_code=304, headers=headers)
        return JSONResponse(answer, headers=headers)

    @app.post("/api/admin/approvals/{name}", dependencies=admin)
    async def decide(name: str, request: Request) -> Response:
        name = (await opened(service, name)).thread
        body = await read_json(request)
        answering = isinstance(body, dict) and "answers" in body
        try:
            if not answering:
                check_form(body)
        except DecisionError as error:
            raise Refused(400, str(error)) from None
        try:
            claim = await runs.claim(name, deciding=True)
        except Refused as refused:
            # Another decision holds the thread: once it is accepted or refused, say which.
            decided = await runs.decision_settled(name) if refused.status == 409 else None
            if decided is None:
                raise
            raise Refused(
                409, f"thread '{name}' was already decided by {decided}; its run goes on"
            ) from None
        try:
            session = await opened(service, name)
            payload = await pending_payload(session, name, service.store)
            calls: list[ApprovalCall | QuestionCall] = list(payload["calls"])
            schemas = {tool_name: tool_schema(tool) for tool_name, tool in session.tools.items()}
            decisions: ResumeValue | AnswerValue
            try:
                if payload["kind"] == QUESTION_KIND:
                    decisions = answer_value(body, calls, by="admin")
                elif answering:
                    raise DecisionError(
                        f"thread '{escaped(name)}' waits for decisions on write calls, not "
                        "for answers"
                    )
                else:
                    decisions = resume_value(body, calls, schemas, by="admin")
            except DecisionError as error:
                raise Refused(400, str(error)) from None
            bound = await bound_or_refused(session, decisions)
        except BaseException:
            await claim.release()
            raise
        decided_at = now()
        runs.decide(name, f"admin at {decided_at}")
        run = runs.start(claim, session, resume_frames(session, calls, bound, previews))
        if "text/event-stream" in request.headers.get("accept", ""):
            return stream(run)
        answer = outcome(name, calls, decisions, await run.collect(), ("admin", decided_at))
        return JSONResponse(answer, headers=NO_STORE)

    @app.get("/api/admin/inbox", dependencies=admin)
    async def inbox_stream() -> Response:
        """What waits, again whenever it changes, as server-sent events (web/inbox.py)."""
        events = inbox_events(runs, lambda: waiting_views(service.store, service.graph))
        headers = {**NO_STORE, "X-Accel-Buffering": "no"}
        return StreamingResponse(events, media_type="text/event-stream", headers=headers)

    @app.post("/api/admin/approvals/{name}/preview", dependencies=admin)
    async def preview_call(name: str, request: Request) -> Response:
        """A pending call's whole preview, a page of it at a time, or that of the call as an
        edit would change it (`args`): worked out by dry runs, nothing runs."""
        session = await opened(service, name)
        name = session.thread
        body = only_keys(
            await read_json(request), {"call_id", "args", "offset", "limit"}, "a preview"
        )
        payload = await pending_payload(session, name, service.store)
        call = next((c for c in payload["calls"] if c.get("id") == body.get("call_id")), None)
        if call is None:
            ids = ", ".join(str(c.get("id")) for c in payload["calls"])
            wanted = body.get("call_id")
            raise Refused(400, f"thread '{escaped(name)}' waits on no call {wanted!r} ({ids})")
        args = body.get("args", call.get("args"))
        if not isinstance(args, dict):
            raise Refused(400, '"args" must be a JSON object of the call\'s arguments')
        offset, limit = body.get("offset", 0), body.get("limit", PREVIEW_PAGE)
        if not all(isinstance(n, int) and n >= 0 for n in (offset, limit)):
            raise Refused(400, '"offset" and "limit" must be whole numbers from 0')
        asked = {**call, "args": args}
        kept = await previews.drawn(session, asked)  # a diff: once per state
        shown = kept.whole if kept is not None else await previews.worked_out_whole(session, asked)
        words = kept.whole_words() if kept is not None else None
        page = shown.lines[offset : offset + min(limit, PREVIEW_PAGE)]
        answer = {
            "call_id": call["id"],
            "offset": offset,
            "total": len(shown.lines),
            "lines": page,
            "preview_id": shown.preview_id,  # what these lines show, as an approval binds it
            **payloads.page_facts(shown, offset, offset + len(page), words),
        }
        return JSONResponse(answer, headers=NO_STORE)

    # A name with a '/' in it matches no route above; say the rule rather than "Not Found".
    @app.api_route("/api/threads/{name:path}", methods=["GET", "POST"], include_in_schema=False)
    @app.api_route(
        "/api/admin/approvals/{name:path}", methods=["GET", "POST"], include_in_schema=False
    )
    async def bad_name(name: str) -> Response:
        base, _, last = name.rpartition("/")
        given = base if last in ("messages", "preview") else name
        if not follows_rule(unquote(given)):
            raise Refused(400, name_problem(given))
        raise Refused(404, f"no such endpoint: {name[:100]!r}")

    # The last added runs first: every request is logged, then guarded, then routed.
    if access.cors_origins:  # no CORS unless asked for (--cors-origin), and only those
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(access.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "Accept", "If-None-Match"],
            expose_headers=["ETag", "Server-Timing"],
        )
    app.add_middleware(Guard, access=access)
    app.add_middleware(AccessLog, verbose=service.verbose)
    return app


async def opened(service: Service, name: str) -> ThreadSession:
    """The session on the thread `name` names; 400 when it is no thread name (the one rule
    the terminal keeps too, core.threads.thread_names)."""
    try:
        return await service.session(name)
    except ThreadNameError as error:
        raise Refused(400, str(error)) from None
    except OtherRoots as error:  # a yes binds to the roots the thread was started with
        raise Refused(409, str(error)) from None


def server_timing(began: float, previews: PreviewCache) -> str:
    """The listing's time, and the diffs worked out and reused since the server started
    (web/preview_cache.py's counts: a refresh that computed nothing leaves `computed` as it
    was), as the standard Server-Timing header, which a browser's tools show."""
    spent = (time.perf_counter() - began) * 1000
    return (
        f"listing;dur={spent:.1f}, previews-computed;desc={previews.computed}, "
        f"previews-reused;desc={previews.reused}"
    )


def check_takes_message(view: ThreadView | None) -> None:
    """A message may start a run unless the thread waits: new input to a paused thread would
    drop its pending calls."""
    if view is None:
        return
    if view.problem:
        raise Refused(409, cannot_resume_message(view))
    if view.status == WAITING_ANSWER:
        questions = "; ".join(str(c.get("question") or "") for c in view.waiting)
        raise Refused(
            409,
            f"thread '{view.name}' waits for an answer to the model's question "
            f"({questions[:200]}); it takes a new message once that is answered (the inbox, or "
            f'POST /api/admin/approvals/{view.name} with {{"answers": ...}})',
        )
    if view.status == WAITING:
        calls = ", ".join(format_call(c.get("name"), c.get("args"), 60) for c in view.waiting)
        raise Refused(
            409,
            f"thread '{escaped(view.name)}' waits for approval of {calls}; it takes a new message "
            f"once that is decided (the inbox, or POST /api/admin/approvals/{escaped(view.name)})",
        )


async def pending_payload(session: ThreadSession, name: str, store: Store | None = None) -> Pause:
    """What the thread waits on (an approval or a question), from its checkpoint's
    interrupts; 404 when nothing (saying who decided the last batch, and when)."""
    view = await session.view()
    if view is not None and view.problem:
        raise Refused(409, cannot_resume_message(view))
    payload = pending_approval(view.snapshot if view is not None else None)
    if payload is None:
        decided = await last_decided(store, name) if store is not None else None
        if decided:
            raise Refused(
                404, f"thread '{escaped(name)}' has nothing pending: already decided by {decided}"
            )
        raise Refused(404, f"thread '{escaped(name)}' has nothing pending")
    return payload


async def last_decided(store: Store, name: str) -> str | None:
    """Who decided the thread's last call, and when, from the audit: "admin at T"."""
    rows = [row for row in await store.audit_rows(name) if row.decision != "undo"]
    return f"{rows[-1].by} at {rows[-1].time}" if rows else None


def stream(run: Run) -> StreamingResponse:
    # X-Accel-Buffering: a proxy in front (nginx) would otherwise hold the events back.
    headers = {**NO_STORE, "X-Accel-Buffering": "no"}
    return StreamingResponse(run.stream(), media_type="text/event-stream", headers=headers)


async def turn_frames(
    session: ThreadSession, view: ThreadView | None, text: str, previews: PreviewCache
) -> AsyncIterator[Frame]:
    """A new message's run. An undo or a run a crash cut off is finished first, as the
    terminal does on opening the thread (core.opening.recover); if that pauses, the message
    waits for the decision and is not sent."""
    async for frame in run_frames(session, recover(session, view), previews):
        yield frame
    if session.paused_on is not None:
        yield "error", {"text": "your message was not sent: the thread waits for approval"}
        return
    async for frame in run_frames(session, session.turn(text), previews):
        yield frame


# Told with a 428 or a 412: what an HTTP client (the inbox page does this) does next.
LOOK_AGAIN = (
    "; fetch the call's preview again (GET /api/admin/approvals, or POST .../preview with an "
    "edit's args) and decide with its preview_id"
)


async def bound_or_refused(session: ThreadSession, decisions: ResumeValue | AnswerValue) -> Bound:
    """The decisions bound to the previews they answer (core.changes.binding), before
    anything resumes: 428 for an approval or edit that names no preview, 412 for one that
    names another call's preview or whose preview no longer shows what is there, the line
    saying which. Never filled in from what this process showed last."""
    try:
        return await session.bind(resume_json(decisions))
    except Unbound as error:
        raise Refused(428, f"{error}{LOOK_AGAIN}") from None
    except (Stale, Foreign) as error:
        raise Refused(412, f"{error}{LOOK_AGAIN}") from None


async def resume_frames(
    session: ThreadSession,
    calls: Sequence[ApprovalCall | QuestionCall],
    bound: Bound,
    previews: PreviewCache,
) -> AsyncIterator[Frame]:
    """The admin's decisions (or answers to a question), then the run they resume."""
    decisions = bound.value  # either kind, read as its JSON form
    for call in calls:
        if "answers" in decisions:
            kind, text = "answer", decisions["answers"][call["id"]]
        else:
            decision = decisions["decisions"][call["id"]]
            kind = "grant" if decision.get("grant") else decision["type"]
            text = decision.get("message", "")
        yield decision_frame(Decision(call["id"], call["name"], kind, text, "admin"))
    async for frame in run_frames(session, session.resume(bound), previews):
        yield frame
