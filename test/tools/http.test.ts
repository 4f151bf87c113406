import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { makeHttpTool } from "../../src/adapters/integrations/tools/httpTool.js";
import { defineAgent, openRuntime } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { callContext } from "./calls.js";

const tempDir = useTempDir();

const freePort = async (): Promise<number> => {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
};

const noLookup = async () => ({ found: "unknown" as const, reason: "no status service in this test" });

describe("http_request: only an error that proves the request never left is definite (law 4)", () => {
  it("F3: a redirect after a processed POST is an outcome, never followed and never a definite failure", async () => {
    const dir = tempDir();
    const dead = await freePort();
    const received: string[] = [];
    const server = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => {
        body += c;
      });
      req.on("end", () => {
        received.push(`${req.method} ${req.url} ${body}`);
        res.writeHead(303, { location: `http://127.0.0.1:${dead}/receipt` });
        res.end();
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const port = (server.address() as AddressInfo).port;
    const http = makeHttpTool({ lookup: noLookup });
    const agent = defineAgent({
      name: "h",
      version: "1",
      run: async (turn) => turn.tool(http, { url: `http://127.0.0.1:${port}/payments`, body: { amount: 5 } }),
    });
    const rt = await openRuntime({ store: join(dir, "j.db"), agents: [agent], tools: [http] });
    try {
      const run = await rt.submit({ chatId: "c", inputId: "i", agent: "h", content: null });
      const result = await run.result;
      const types = (await rt.events(run.runId)).map((e) => e.event.type);
      expect(received).toEqual(['POST /payments {"amount":5}']);
      expect(types).not.toContain("call.failed");
      expect(result).toMatchObject({
        status: "completed",
        output: { status: 303, location: `http://127.0.0.1:${dead}/receipt` },
      });
    } finally {
      server.close();
      await rt.close();
    }
  });

  it("a refused connection, an unknown host and a port fetch refuses are definite: the request never left", async () => {
    const http = makeHttpTool({ lookup: noLookup });
    const port = await freePort();
    for (const url of [
      `http://127.0.0.1:${port}/x`,
      "http://no-such-host.invalid/x",
      "http://127.0.0.1:6000/x",
    ]) {
      await expect(
        http.run({ url, method: "POST", headers: {} }, callContext("r/0#1")),
      ).rejects.toMatchObject({ name: "DefiniteFailure", message: expect.stringContaining("never left") });
    }
  });

  it("every 4xx refusal is definite (408, 425 and 429 included, with the server's Retry-After kept); a 5xx leaves the call in doubt", async () => {
    let status = 400;
    const server = createServer((_req, res) => {
      res.writeHead(status, {
        "content-type": "application/json",
        ...(status === 429 ? { "retry-after": "7" } : {}),
      });
      res.end(JSON.stringify({ status }));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/x`;
    const http = makeHttpTool({ lookup: noLookup });
    const send = () =>
      http.run({ url, method: "POST", headers: {} }, callContext("r/0#1")).then(
        (result) => ({ result }),
        (error: Error & { details?: unknown }) => ({ error: error.name, details: error.details }),
      );
    try {
      for (const [code, expected] of [
        [400, { error: "DefiniteFailure" }],
        [409, { error: "DefiniteFailure" }],
        [408, { error: "DefiniteFailure", details: { status: 408 } }],
        [425, { error: "DefiniteFailure", details: { status: 425 } }],
        [429, { error: "DefiniteFailure", details: { status: 429, retryAfter: "7" } }],
        [500, { error: "Error" }],
        [503, { error: "Error" }],
      ] as const) {
        status = code;
        expect(await send(), `status ${code}`).toMatchObject(expected);
      }
    } finally {
      server.close();
    }
  });
});
