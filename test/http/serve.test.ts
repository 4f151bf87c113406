import { spawn } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { serve } from "../../src/index.js";
import { expectTwoLineError, ROOT, runCli } from "../cli/cliProcess.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const MAIN = join(ROOT, "src", "adapters", "surfaces", "cli", "main.ts");

/**
 * A journal made by `holdfast demo` (a completed run), in a child process: the in-process runs'
 * check for journals left open (test/cli/cliProcess.ts) is about CLI commands, and the servers this
 * file opens in process hold their reader until they are collected.
 */
const demoJournal = async (): Promise<string> => {
  const dir = join(tempDir(), "j");
  mkdirSync(dir);
  const db = join(dir, "journal.db");
  const result = await runCli(["demo", "--db", db, "--json"], { process: true });
  expect(result.code).toBe(0);
  return db;
};

describe("holdfast serve", () => {
  it("prints where it listens and where the token is, answers with the token, and stops cleanly on SIGTERM", async () => {
    const db = await demoJournal();
    const child = spawn(
      process.execPath,
      ["--import", "tsx", MAIN, "serve", "--db", db, "--port", "0", "--json"],
      {
        cwd: ROOT,
        env: { ...process.env, HOLDFAST_TOKEN: "", HOLDFAST_STORE: "" },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
    try {
      const parsed = () => {
        try {
          return JSON.parse(stdout) as unknown;
        } catch {
          return null;
        }
      };
      await expect.poll(parsed, { timeout: 30_000 }).not.toBeNull();
      const started = parsed() as {
        url: string;
        panelUrl: string;
        port: number;
        token: { from: string; path: string };
      };
      expect(started.url).toBe(`http://127.0.0.1:${started.port}`);
      expect(started.panelUrl).toMatch(
        new RegExp(`^http://holdfast-${started.port}-[0-9a-f]{12}\\.localhost:${started.port}$`),
      );
      expect(started.token).toEqual({ from: "file-created", path: join(db, "..", "token") });
      expect(stdout).not.toMatch(/"token":"[A-Za-z0-9_-]{24,}"/);
      const { readFileSync } = await import("node:fs");
      const token = readFileSync(started.token.path, "utf8").trim();
      const health = await fetch(`${started.url}/api/health`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(health.status).toBe(200);
      expect(await health.json()).toMatchObject({ status: "ok", readOnly: true });
      const runs = (await (
        await fetch(`${started.url}/api/runs`, { headers: { authorization: `Bearer ${token}` } })
      ).json()) as { total: number };
      expect(runs.total).toBe(1);
      expect((await fetch(`${started.url}/api/runs`)).status).toBe(401);
      const page = await fetch(`${started.url}/`, { redirect: "manual" });
      expect(page.status).toBe(404);
      expect(page.headers.get("location")).toBeNull();
      expect(await page.text()).not.toContain(new URL(started.panelUrl).hostname);
    } finally {
      child.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
    expect(stderr).toBe("");
  });

  it("refuses a journal that does not exist, and creates nothing", async () => {
    const dir = tempDir();
    const db = join(dir, "missing.db");
    const result = await runCli(["serve", "--db", db, "--port", "0"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("there is no journal");
    expect(existsSync(db)).toBe(false);
    expect(existsSync(join(dir, "token"))).toBe(false);
  });

  it("a port in use is an expected trouble: the reason, a hint, exit 1 — not an internal error", async () => {
    const db = await demoJournal();
    const { createServer } = await import("node:net");
    const holder = createServer();
    await new Promise<void>((listening) => holder.listen(0, "127.0.0.1", listening));
    const port = (holder.address() as { port: number }).port;
    try {
      const result = await runCli(["serve", "--db", db, "--port", String(port)]);
      expect(result.code).toBe(1);
      const { reason, hint } = expectTwoLineError(result.stderr);
      expect(reason).toContain(`port ${port} on 127.0.0.1 is in use`);
      expect(hint).toContain("--port (0 picks a free one)");
      expect(hint).not.toContain("unexpected");
    } finally {
      await new Promise((closed) => holder.close(closed));
    }
  });

  it("refuses to bind beyond loopback without a token set on purpose, and a short token", async () => {
    const db = await demoJournal();
    const saved = process.env.HOLDFAST_TOKEN;
    delete process.env.HOLDFAST_TOKEN;
    try {
      await expect(serve({ store: db, host: "0.0.0.0", port: 0 })).rejects.toThrow(
        /needs a token set on purpose/,
      );
      expect(existsSync(join(db, "..", "token"))).toBe(false);
      await expect(serve({ store: db, port: 0, token: "short" })).rejects.toThrow(/at least 24/);
      // A token file named on purpose counts once it exists; it is never made for a wide bind.
      const tokenFile = join(db, "..", "ops-token");
      await expect(serve({ store: db, host: "0.0.0.0", port: 0, tokenFile })).rejects.toThrow(
        /existing file/,
      );
      expect(existsSync(tokenFile)).toBe(false);
      writeFileSync(tokenFile, "a-long-enough-token-from-a-file-5678\n", { mode: 0o600 });
      const fromFile = await serve({ store: db, host: "0.0.0.0", port: 0, tokenFile });
      expect(fromFile.token).toMatchObject({
        from: "file",
        path: tokenFile,
        token: "a-long-enough-token-from-a-file-5678",
      });
      await fromFile.close();
      const server = await serve({
        store: db,
        host: "0.0.0.0",
        port: 0,
        token: "a-long-enough-token-for-this-test-1234",
      });
      try {
        expect(server.token.from).toBe("option");
        const response = await server.app.request("/api/health", {
          headers: {
            host: `0.0.0.0:${server.port}`,
            authorization: "Bearer a-long-enough-token-for-this-test-1234",
          },
        });
        expect(response.status).toBe(200);
      } finally {
        await server.close();
      }
    } finally {
      if (saved !== undefined) process.env.HOLDFAST_TOKEN = saved;
    }
  });

  it("a read-only server leaves the journal's bytes as they were until something is decided", async () => {
    const db = await demoJournal();
    const { readFileSync } = await import("node:fs");
    const before = readFileSync(db);
    const server = await serve({ store: db, port: 0, token: "a-long-enough-token-for-this-test-1234" });
    try {
      const headers = {
        host: `127.0.0.1:${server.port}`,
        authorization: "Bearer a-long-enough-token-for-this-test-1234",
      };
      for (const path of ["/api/health", "/api/runs", "/api/openapi.json"]) {
        expect((await server.app.request(path, { headers })).status).toBe(200);
      }
      expect((await server.app.request("/api/audit", { method: "POST", headers })).status).toBe(200);
    } finally {
      await server.close();
    }
    expect(readFileSync(db).equals(before)).toBe(true);
  });
});
