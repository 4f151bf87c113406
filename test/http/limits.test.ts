import { type IncomingHttpHeaders, request } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { BODY_LIMITS } from "../../src/adapters/surfaces/http/security.js";
import { PLAN_MAX_BYTES, PLAN_MAX_ITEMS } from "../../src/runtime/documents.js";
import { useTempDir } from "../support/tmp.js";
import { type Given, givenServer } from "./given.js";

const tempDir = useTempDir();
let given: Given | undefined;
afterEach(async () => {
  await given?.close();
  given = undefined;
});

interface Reply {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/**
 * A POST over a real connection that sends only `sent` bytes of its body and then waits: a reply
 * can only come from a server that answered without reading the rest. `declared` is the
 * Content-Length announced, or chunked without one.
 */
const postPartly = (
  port: number,
  path: string,
  headers: Record<string, string>,
  declared: number | "chunked",
  sent: number,
): Promise<Reply> =>
  new Promise((resolve, reject) => {
    let answered = false;
    const req = request({
      host: "127.0.0.1",
      port,
      path,
      method: "POST",
      headers: { ...headers, ...(declared === "chunked" ? {} : { "content-length": String(declared) }) },
    });
    req.on("response", (response) => {
      let body = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => {
        body += chunk;
      });
      response.on("end", () => {
        answered = true;
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body });
        req.destroy();
      });
    });
    // The server closes the connection after a 413; writing the rest of the body may then fail.
    req.on("error", (error) => {
      if (!answered) reject(error);
    });
    req.write(Buffer.alloc(sent, "a"));
  });

describe("request bodies", () => {
  it("R3: a body over the route's limit is refused with 413 before it is read, on /login and on the API; nothing is written", async () => {
    given = await givenServer(tempDir());
    const g = given;
    const { runId } = await g.submit("pair");
    const before = await g.head();
    const form = {
      host: g.panelHost,
      origin: `http://${g.panelHost}`,
      "content-type": "application/x-www-form-urlencoded",
    };

    // A whole sign-in form past the limit: refused, not parsed (a wrong token would be a 401).
    const whole = await g.request("/login", {
      method: "POST",
      auth: "none",
      headers: { ...form, "content-length": String(64 * 1024) },
      body: `token=x&name=${"a".repeat(64 * 1024 - 13)}`,
    });
    expect(whole.status).toBe(413);
    expect(await whole.text()).toBe(
      "the sign-in form is larger than the 4 KiB this route takes; nothing was read or written.",
    );

    // 256 MiB announced, 64 KiB sent: the answer comes by the Content-Length, the rest never read.
    const announced = await postPartly(g.server.port, "/login", form, 256 * 1024 * 1024, 64 * 1024);
    expect(announced.status).toBe(413);
    expect(announced.headers.connection).toBe("close");
    // Without a Content-Length, reading stops at the limit.
    const chunked = await postPartly(g.server.port, "/login", form, "chunked", 64 * 1024);
    expect(chunked.status).toBe(413);

    const api = {
      host: g.host,
      authorization: `Bearer ${g.token}`,
      "content-type": "application/json",
    };
    const decisions = `/api/runs/${runId}/decisions`;
    const tooBig = await postPartly(g.server.port, decisions, api, BODY_LIMITS.api + 1, 64 * 1024);
    expect(tooBig.status).toBe(413);
    expect(JSON.parse(tooBig.body)).toEqual({
      error: {
        code: "body-too-large",
        message: "the body is larger than the 4 MiB this route takes; nothing was read or written",
        hint: "send a smaller body (docs/api.md, Limits)",
      },
    });
    const streamed = await postPartly(g.server.port, decisions, api, "chunked", BODY_LIMITS.api + 64 * 1024);
    expect(streamed.status).toBe(413);
    expect(await g.head()).toEqual(before);
  });

  it("the panel's plan form takes the largest plan there can be, in the costliest encoding", async () => {
    given = await givenServer(tempDir());
    const g = given;
    const { cookie, csrf } = await g.login();
    // Form-encoded, every byte of 'ü', '&' and '%' becomes three; pretty-printing adds more.
    const item = (i: number, length: number) => ({ id: `i${i}`, text: "ü&%".repeat(length), done: false });
    const plan = { title: "large", items: [] as ReturnType<typeof item>[] };
    const bytes = () => Buffer.byteLength(JSON.stringify(plan), "utf8");
    for (let i = 0; i < PLAN_MAX_ITEMS; i++) plan.items.push(item(i, 150));
    while (bytes() > PLAN_MAX_BYTES) plan.items.at(-1)!.text = plan.items.at(-1)!.text.slice(3);
    const body = new URLSearchParams({
      _csrf: csrf,
      expectedRevision: "0",
      value: JSON.stringify(plan, null, 2),
    }).toString();
    expect(body.length).toBeGreaterThan(2.5 * PLAN_MAX_BYTES);
    expect(body.length).toBeLessThanOrEqual(BODY_LIMITS.form);
    const response = await g.request("/chats/large/plan", {
      method: "POST",
      auth: "none",
      headers: {
        host: g.panelHost,
        origin: `http://${g.panelHost}`,
        cookie,
        "content-type": "application/x-www-form-urlencoded",
        "content-length": String(body.length),
      },
      body,
    });
    expect(response.status).toBe(200);
    expect(await response.text()).toContain("Saved.");
    expect((await g.runtime.documents.read("large")).revision).toBe(1);
  });
});
