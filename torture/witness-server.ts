import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * The outside witness for HTTP effects: a server on 127.0.0.1 that counts every request per
 * idempotency key, as a real API with idempotency keys would keep them.
 *
 * - `POST /effects` acts (counted) unless its key was reserved: then it is refused with 409 and
 *   never counted.
 * - `POST /lookup/<key>` is the lookup the reconciler uses, atomic: `{ found: true, result }` when
 *   the key acted, else it reserves the key and answers `{ found: false, reserved: true }`.
 * - `GET /status/<key>` only looks (200 or 404); it proves nothing about a request still on its way.
 * - `GET /site/form?label=L`, `POST /site/submit`, `GET /site/orders`: the browser agent's test site
 *   (`--agent browser`). The form's submit is counted under the `Idempotency-Key` header the browser
 *   tool sends, as `/effects` is (refused with 409, never counted, when a lookup reserved the key),
 *   when it has arrived; the answer then waits {@link SITE_SUBMIT_DELAY_MS}, so a kill lands while
 *   the submit is in flight. The submit's probe is `POST /lookup/<key>`, made by the probe's page.
 * - `POST /limited` (the `backoff` fault kind): a rate-limited API. It answers the first `refuse`
 *   requests of a call (its body's `refuse`, the call being the key before `#`) with 429, the
 *   first with `Retry-After: 5`, a second without (the policy's backoff decides), then acts as `/effects` does. Every request is kept in `requests`, refused
 *   or not, with its attempt (the key after `#`) and when it arrived: the check finds a retry
 *   beyond the policy, an attempt count that went back after a crash, an attempt before its due time.
 */
export interface WitnessServer {
  readonly url: string;
  /** Effects per idempotency key. */
  readonly counts: Map<string, number>;
  /** Keys a lookup reserved: refused from then on. */
  readonly reserved: Set<string>;
  /** Requests to `/limited` per call, in the order they arrived. */
  readonly requests: Map<string, LimitedRequest[]>;
  /** The test site's orders (its form submits counted once per key), in the order they arrived. */
  readonly orders: Array<{ readonly label: string; readonly key: string }>;
  close(): Promise<void>;
}

/** One request the rate-limited endpoint received. */
export interface LimitedRequest {
  readonly key: string;
  readonly attempt: number;
  /** Epoch ms when it arrived. */
  readonly at: number;
  /** What it answered: 429 (refused, retry later), 409 (the key was reserved), 201 (acted). */
  readonly status: 429 | 409 | 201;
}

/** How long the test site's form submit waits before it answers (it was counted already). */
export const SITE_SUBMIT_DELAY_MS = 600;

const sitePage = (title: string, body: string) =>
  `<!doctype html><html><head><title>${title}</title></head><body>${body}</body></html>`;
const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export const startWitnessServer = async (): Promise<WitnessServer> => {
  const counts = new Map<string, number>();
  const reserved = new Set<string>();
  const requests = new Map<string, LimitedRequest[]>();
  const answer = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };
  /** The test site's received orders: label and key, in the order they arrived. */
  const orders: Array<{ label: string; key: string }> = [];
  const html = (res: ServerResponse, status: number, title: string, body: string) => {
    res.writeHead(status, { "content-type": "text/html; charset=utf-8" });
    res.end(sitePage(title, body));
  };
  const server: Server = createServer((req, res) => {
    const site = new URL(req.url ?? "/", "http://site");
    if (req.method === "GET" && site.pathname === "/site/form") {
      const label = escapeHtml(site.searchParams.get("label") ?? "");
      html(
        res,
        200,
        "Order",
        `<form id="order" method="post" action="/site/submit"><input id="name" name="name"><input type="hidden" name="label" value="${label}"><button type="submit">Order</button></form>`,
      );
      return;
    }
    if (req.method === "POST" && site.pathname === "/site/submit") {
      const key = String(req.headers["idempotency-key"] ?? "");
      let body = "";
      req.on("data", (d) => {
        body += d;
      });
      req.on("end", () => {
        const form = new URLSearchParams(body);
        const label = form.get("label") ?? "";
        if (reserved.has(key)) {
          html(res, 409, "Refused", `<p id="refused">refused ${escapeHtml(key)}: the key was reserved</p>`);
          return;
        }
        counts.set(key, (counts.get(key) ?? 0) + 1);
        if (counts.get(key) === 1) orders.push({ label, key });
        setTimeout(
          () =>
            html(res, 200, "Thanks", `<p id="received">received ${escapeHtml(form.get("name") ?? "")}</p>`),
          SITE_SUBMIT_DELAY_MS,
        );
      });
      return;
    }
    if (req.method === "GET" && site.pathname === "/site/orders") {
      html(
        res,
        200,
        "Orders",
        `<ul>${orders
          .filter((o) => o.label === (site.searchParams.get("label") ?? o.label))
          .map((o) => `<li data-key="${escapeHtml(o.key)}">order ${escapeHtml(o.label)}</li>`)
          .join("")}</ul>`,
      );
      return;
    }
    if (req.method === "POST" && req.url === "/effects") {
      const key = String(req.headers["idempotency-key"] ?? "");
      let body = "";
      req.on("data", (d) => {
        body += d;
      });
      req.on("end", () => {
        // Decided when the request has arrived, as the remote side of a real API would.
        if (reserved.has(key)) {
          answer(res, 409, { refused: true, key, reason: "the key was reserved by a lookup" });
          return;
        }
        counts.set(key, (counts.get(key) ?? 0) + 1);
        answer(res, 201, { accepted: true, key, body: JSON.parse(body || "null") });
      });
      return;
    }
    if (req.method === "POST" && req.url === "/limited") {
      const key = String(req.headers["idempotency-key"] ?? "");
      const at = Date.now();
      let body = "";
      req.on("data", (d) => {
        body += d;
      });
      req.on("end", () => {
        const callId = key.split("#")[0]!;
        const attempt = Number(key.split("#")[1]);
        const seen = requests.get(callId) ?? [];
        requests.set(callId, seen);
        const parsed = JSON.parse(body || "null") as { refuse?: unknown } | null;
        const refuse = typeof parsed?.refuse === "number" ? parsed.refuse : 0;
        if (reserved.has(key)) {
          seen.push({ key, attempt, at, status: 409 });
          answer(res, 409, { refused: true, key, reason: "the key was reserved by a lookup" });
          return;
        }
        if (seen.filter((r) => r.status === 429).length < refuse) {
          // The first refusal says when to come back (longer than a process restart, so a
          // recovery resumes the rest of the wait); a later one leaves it to the policy's backoff.
          const first = !seen.some((r) => r.status === 429);
          res.writeHead(429, {
            "content-type": "application/json",
            ...(first ? { "retry-after": "5" } : {}),
          });
          seen.push({ key, attempt, at, status: 429 });
          res.end(JSON.stringify({ error: "rate limited", key }));
          return;
        }
        seen.push({ key, attempt, at, status: 201 });
        counts.set(key, (counts.get(key) ?? 0) + 1);
        answer(res, 201, { accepted: true, key, body: parsed });
      });
      return;
    }
    const lookup = /^\/lookup\/(.+)$/.exec(req.url ?? "");
    if (req.method === "POST" && lookup) {
      const key = decodeURIComponent(lookup[1]!);
      if (counts.has(key)) {
        answer(res, 200, { found: true, result: { accepted: true, key } });
        return;
      }
      reserved.add(key);
      answer(res, 200, { found: false, reserved: true });
      return;
    }
    const status = /^\/status\/(.+)$/.exec(req.url ?? "");
    if (req.method === "GET" && status) {
      const key = decodeURIComponent(status[1]!);
      const found = counts.has(key);
      answer(res, found ? 200 : 404, found ? { accepted: true, key } : { found: false });
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    counts,
    reserved,
    requests,
    orders,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
};
