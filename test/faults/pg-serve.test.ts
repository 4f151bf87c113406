import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { PostgresJournal } from "../../src/adapters/stores/postgres/PostgresJournal.js";
import { serve } from "../../src/index.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { startTcpProxy } from "../support/tcpProxy.js";
import { useTempDir } from "../support/tmp.js";

/* Issue 35, item 2: `serve` while PostgreSQL is away answers 503 with the reason, and stays up. */

const schemas = usePgSchemas();
afterAll(schemas.dropAll);
const tempDir = useTempDir();

describe("serve while PostgreSQL is unavailable", () => {
  it("the API answers 503 journal-unavailable with the reason and a Retry-After, then 200 again once PostgreSQL is back", async () => {
    await requirePg();
    const schema = schemas.fresh();
    await (await PostgresJournal.open(pgUrl(schema))).close();
    const proxy = await startTcpProxy();
    const server = await serve({
      store: proxy.via(pgUrl(schema)),
      port: 0,
      tokenFile: join(tempDir(), "token"),
    });
    const get = (path: string) =>
      server.app.request(path, {
        headers: { host: `127.0.0.1:${server.port}`, authorization: `Bearer ${server.token.token}` },
      });
    try {
      expect((await get("/api/runs")).status).toBe(200);
      proxy.refuse();
      const away = await get("/api/runs");
      expect(away.status).toBe(503);
      expect(away.headers.get("retry-after")).toBe("2");
      const body = (await away.json()) as { error: { code: string; message: string; hint: string } };
      expect(body.error.code).toBe("journal-unavailable");
      expect(body.error.message).toMatch(
        /^the journal postgres:\/\/.* is unavailable: the connection to PostgreSQL failed/,
      );
      proxy.heal();
      expect((await get("/api/runs")).status).toBe(200);
    } finally {
      await server.close();
      await proxy.close();
    }
  });
});
