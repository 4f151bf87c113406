import { join } from "node:path";
import fc from "fast-check";
import { type Server, serve } from "../../src/index.js";
import { hostile, name } from "../hostile.js";
import { givenJournal } from "../journal.js";
import { FuzzFailure, type FuzzTarget, PartialWrite } from "../target.js";

/** A stale plan edit is refused with 409 and recorded on purpose, as `document.conflicted`. */
const recordedRefusal = (route: Route, status: number): boolean =>
  (route === "plan" || route === "panel-plan") && status === 409;

type Route =
  | "decide"
  | "retry"
  | "plan"
  | "audit"
  | "panel-decide"
  | "panel-retry"
  | "panel-plan"
  | "panel-audit"
  | "login"
  | "logout";

interface Request {
  readonly route: Route;
  readonly run: "doubt" | "flaky" | string;
  readonly call: "call" | string;
  readonly body:
    | { readonly kind: "json"; readonly value: unknown }
    | { readonly kind: "text"; readonly value: string }
    | { readonly kind: "bytes"; readonly value: Uint8Array }
    | { readonly kind: "form"; readonly value: Record<string, string> };
  readonly contentType: string | null;
  readonly session: boolean;
  readonly current: boolean;
}

const field = fc.oneof(
  name,
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.constantFrom("stop", "resume", "1", "-1", "ada"),
);
const plausible = fc.record(
  {
    basedOnVersion: fc.oneof(fc.integer({ min: -1, max: 9 }), hostile),
    decidedBy: fc.oneof(field, hostile),
    grantedBy: fc.oneof(field, hostile),
    decision: fc.oneof(fc.constantFrom("resume", "stop", "new-attempt", "confirmed-completed"), hostile),
    attempts: fc.oneof(fc.integer({ min: -1, max: 4 }), hostile),
    note: fc.oneof(field, hostile),
    expectedRevision: fc.oneof(fc.integer({ min: -1, max: 3 }), hostile),
    value: fc.oneof(
      fc.record({
        title: field,
        items: fc.array(fc.record({ id: field, text: field, done: fc.boolean() }), { maxLength: 3 }),
      }),
      hostile,
    ),
    by: fc.oneof(field, hostile),
  },
  { requiredKeys: [] },
);

const request: fc.Arbitrary<Request> = fc.record({
  route: fc.constantFrom<Route>(
    "decide",
    "retry",
    "plan",
    "audit",
    "panel-decide",
    "panel-retry",
    "panel-plan",
    "panel-audit",
    "login",
    "logout",
  ),
  run: fc.oneof(fc.constantFrom("doubt", "flaky"), name),
  call: fc.oneof(fc.constant("call"), name),
  body: fc.oneof(
    { arbitrary: fc.record({ kind: fc.constant("json" as const), value: plausible }), weight: 3 },
    { arbitrary: fc.record({ kind: fc.constant("json" as const), value: fc.jsonValue() }), weight: 2 },
    fc.record({
      kind: fc.constant("text" as const),
      value: fc.oneof(fc.json(), fc.string({ unit: "binary" })),
    }),
    fc.record({ kind: fc.constant("bytes" as const), value: fc.uint8Array({ maxLength: 256 }) }),
    fc.record({
      kind: fc.constant("form" as const),
      value: fc.dictionary(
        fc.constantFrom(
          "_csrf",
          "decision",
          "basedOnVersion",
          "note",
          "by",
          "attempts",
          "token",
          "name",
          "value",
          "expectedRevision",
          "plan",
        ),
        field,
      ),
    }),
  ),
  contentType: fc.oneof(
    { arbitrary: fc.constant("natural"), weight: 4 },
    fc.constantFrom(
      "application/json",
      "application/x-www-form-urlencoded",
      "text/plain",
      "multipart/form-data; boundary=x",
      null,
    ),
  ),
  session: fc.oneof({ arbitrary: fc.constant(true), weight: 4 }, fc.constant(false)),
  current: fc.boolean(),
});

/**
 * The HTTP API and panel, in process, with arbitrary bodies on every mutating route: never a 5xx,
 * and a refused request leaves the journal's head digest as it was.
 */
export const httpTarget: FuzzTarget = {
  name: "http",
  defaultRuns: 40_000,
  setup: async () => {
    const given = await givenJournal();
    const server: Server = await serve({
      store: given.db,
      port: 0,
      tokenFile: join(given.dir, "token"),
      runtime: given.runtime,
      live: { pollMs: 50, heartbeatMs: 1_000 },
    });
    // The panel's own host name: a session works only there, and the API answers there too.
    const host = new URL(server.panelUrl).host;
    const origin = `http://${host}`;
    const login = async () => {
      const response = await server.app.request("/login", {
        method: "POST",
        headers: { host, origin, "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ token: server.token.token, name: "ada" }).toString(),
      });
      const cookie = response.headers.get("set-cookie")?.split(";")[0] ?? "";
      const page = await (await server.app.request("/audit", { headers: { host, cookie } })).text();
      const csrf = /name="_csrf" value="([^"]+)"/.exec(page)?.[1] ?? "";
      if (!cookie || !csrf) throw new Error("the fuzz server's panel login failed");
      return { cookie, csrf };
    };
    const shared = await login();

    const pathOf = async (r: Request): Promise<string> => {
      const held = r.run === "doubt" ? given.doubt : r.run === "flaky" ? given.flaky : undefined;
      const runId = encodeURIComponent(held?.runId ?? r.run);
      const callId = encodeURIComponent(r.call === "call" ? (held?.callId ?? "x") : r.call);
      const chatId = encodeURIComponent(r.run);
      switch (r.route) {
        case "decide":
          return `/api/runs/${runId}/decisions`;
        case "retry":
          return `/api/runs/${runId}/calls/${callId}/retries`;
        case "plan":
          return `/api/chats/${chatId}/plan`;
        case "audit":
          return "/api/audit";
        case "panel-decide":
          return `/runs/${runId}/decide`;
        case "panel-retry":
          return `/runs/${runId}/calls/${callId}/retry`;
        case "panel-plan":
          return `/chats/${chatId}/plan`;
        case "panel-audit":
          return "/audit";
        case "login":
          return "/login";
        case "logout":
          return "/logout";
      }
    };

    const bodyOf = async (r: Request, csrf: string): Promise<string | Uint8Array> => {
      const held = r.run === "doubt" ? given.doubt : r.run === "flaky" ? given.flaky : undefined;
      const version = held && r.current ? (await given.runtime.events(held.runId)).length : undefined;
      switch (r.body.kind) {
        case "json": {
          const value =
            version !== undefined &&
            r.body.value !== null &&
            typeof r.body.value === "object" &&
            !Array.isArray(r.body.value)
              ? { ...r.body.value, basedOnVersion: version }
              : r.body.value;
          return JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? String(v) : v)) ?? "";
        }
        case "text":
          return r.body.value;
        case "bytes":
          return new Uint8Array(r.body.value);
        case "form":
          return new URLSearchParams({
            ...r.body.value,
            ...(r.session ? { _csrf: csrf } : {}),
            ...(version !== undefined ? { basedOnVersion: String(version) } : {}),
          }).toString();
      }
    };

    return {
      arbitrary: request,
      check: async (r: Request) => {
        const path = await pathOf(r);
        // Signing out ends a session: it gets one of its own, and the others keep the shared one.
        const session = r.route === "logout" && r.session ? await login() : shared;
        const body = await bodyOf(r, session.csrf);
        const panel = r.route.startsWith("panel") || r.route === "login" || r.route === "logout";
        const headers: Record<string, string> = { host };
        const natural = panel ? "application/x-www-form-urlencoded" : "application/json";
        const contentType = r.contentType === "natural" ? natural : r.contentType;
        if (contentType) headers["content-type"] = contentType;
        if (panel) {
          headers.origin = origin;
          if (r.session) headers.cookie = session.cookie;
        } else headers.authorization = `Bearer ${server.token.token}`;
        const before = await given.head();
        const method = r.route === "plan" ? "PUT" : "POST";
        const response = await server.app.request(path, { method, headers, body });
        const text = await response.text();
        if (response.status >= 500)
          throw new FuzzFailure(`${method} ${path} answered ${response.status}: ${text.slice(0, 500)}`);
        if (
          response.status >= 400 &&
          !recordedRefusal(r.route, response.status) &&
          (await given.head()) !== before
        )
          throw new PartialWrite(
            `${method} ${path} was refused (${response.status}) but the journal's head changed`,
          );
        return `${r.route}: ${response.status}`;
      },
      secretsLeft: given.secretsLeft,
      close: async () => {
        await server.close();
        await given.close();
      },
    };
  },
};
