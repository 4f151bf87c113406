import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Server, serve } from "../../src/index.js";
import { runCli } from "../cli/cliProcess.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { startWorker } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";

/*
 * Liveness everywhere (decision 0052): a run whose process was SIGKILLed shows stalled in
 * `runs --json`, `show --json` and the API — at once when its owner's pid is dead on this host,
 * after its lease when its id names no process here — and a live owner shows its host, pid, lease
 * and heartbeat, not stalled. Readers only report: nothing is claimed or recovered.
 */

const tempDir = useTempDir();
const schemas = usePgSchemas();

beforeAll(async () => {
  await requirePg();
});
afterAll(async () => {
  await schemas.dropAll();
});

const engines = [
  { engine: "libSQL", store: () => join(tempDir(), "journal.db") },
  { engine: "PostgreSQL", store: () => pgUrl(schemas.fresh()) },
] as const;

interface RunJson {
  readonly runId: string;
  readonly status: string;
  readonly owner: {
    readonly workerId: string;
    readonly host: string | null;
    readonly pid: number | null;
  } | null;
  readonly leaseExpiresAt: string | null;
  readonly lastHeartbeatAt: string | null;
  readonly stalled: boolean;
  readonly stalledBecause: string | null;
  readonly stalledSince: string | null;
}

const runsJson = async (store: string, ...extra: string[]): Promise<RunJson[]> => {
  const result = await runCli(["runs", "--db", store, "--json", ...extra]);
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as RunJson[];
};

const showJson = async (
  store: string,
  runId: string,
): Promise<{ run: RunJson; next: { text: string; live: boolean } }> => {
  const result = await runCli(["show", runId, "--db", store, "--json"]);
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout);
};

/** A server on the journal with no runtime of its own: reads through its read-only reader. */
const api = async (store: string) => {
  const server: Server = await serve({ store, port: 0, tokenFile: join(tempDir(), "token") });
  const get = async (path: string) => {
    const response = await server.app.request(path, {
      headers: { host: `127.0.0.1:${server.port}`, authorization: `Bearer ${server.token.token}` },
    });
    expect(response.status).toBe(200);
    return response.json() as Promise<Record<string, unknown>>;
  };
  return { get, close: () => server.close() };
};

/** A worker process running one `gated` run: it did its call and now waits, owning the run. */
const gatedOwner = async (store: string, env: Record<string, string> = {}) => {
  const worker = startWorker({
    HF_DB: store,
    HF_WITNESS: join(tempDir(), "witness.txt"),
    HF_ACTION: "submit",
    HF_CHAT: "chat-1",
    HF_INPUT: "input-1",
    HF_AGENT: "gated",
    ...env,
  });
  await worker.waitFor("gated");
  const [run] = await runsJson(store);
  return { worker, runId: run!.runId };
};

describe.each(engines)("$engine: who runs a run, as readers see it", ({ store: makeStore }) => {
  it("a live owner shows its host, pid, lease and heartbeat, not stalled; SIGKILLed, its run shows stalled at once (its pid is dead on this host)", async () => {
    const store = makeStore();
    const { worker, runId } = await gatedOwner(store);
    const server = await api(store);
    try {
      const [live] = await runsJson(store);
      expect(live).toMatchObject({ runId, status: "running", stalled: false, stalledBecause: null });
      expect(live!.owner).toMatchObject({ pid: worker.child.pid });
      expect(live!.owner!.workerId).toContain(`:${worker.child.pid}:`);
      expect(live!.leaseExpiresAt).not.toBeNull();
      expect(live!.lastHeartbeatAt).not.toBeNull();
      expect((await server.get(`/api/runs/${runId}`)).run).toMatchObject({
        stalled: false,
        owner: { pid: worker.child.pid },
      });

      await worker.kill();

      const [dead] = await runsJson(store);
      expect(dead).toMatchObject({ runId, status: "running", stalled: true, stalledBecause: "owner-dead" });
      expect(dead!.owner).toMatchObject({ pid: worker.child.pid });
      expect(dead!.stalledSince).not.toBeNull();
      expect((await runsJson(store, "--status", "stalled")).map((r) => r.runId)).toEqual([runId]);
      expect(await runsJson(store, "--status", "running")).toHaveLength(1);

      const shown = await showJson(store, runId);
      expect(shown.run).toMatchObject({ stalled: true, stalledBecause: "owner-dead" });
      expect(shown.next).toMatchObject({ live: false });
      expect(shown.next.text).toContain('no runtime with agent "gated@1" is live now');

      const page = await server.get("/api/runs?status=stalled");
      expect(page).toMatchObject({ stalled: 1, total: 1 });
      expect((page.runs as RunJson[])[0]).toMatchObject({
        runId,
        stalled: true,
        stalledBecause: "owner-dead",
      });
      const view = await server.get(`/api/runs/${runId}`);
      expect(view.run).toMatchObject({ stalled: true, owner: { pid: worker.child.pid } });
      expect(view.next).toMatchObject({ live: false, agent: "gated@1" });

      // Readers only reported: the claim is still the dead owner's, nothing was recovered.
      const again = await showJson(store, runId);
      expect(again.run.owner?.workerId).toBe(dead!.owner!.workerId);
      expect(again.run.status).toBe("running");
    } finally {
      await server.close();
      await worker.kill();
    }
  });

  it("an owner whose id names no process here shows stalled only once its lease ran out", async () => {
    const store = makeStore();
    const { worker, runId } = await gatedOwner(store, { HOLDFAST_WORKER_ID: "box-b-worker-7" });
    try {
      const [live] = await runsJson(store);
      expect(live).toMatchObject({ stalled: false, owner: { workerId: "box-b-worker-7" } });
      await worker.kill();
      // No verdict from this host on another's id: the lease (3 s in the worker) decides.
      await expect
        .poll(async () => (await runsJson(store))[0]?.stalledBecause, { timeout: 20_000, interval: 250 })
        .toBe("lease-expired");
      const [dead] = await runsJson(store, "--status", "stalled");
      expect(dead).toMatchObject({ runId, stalled: true, owner: { workerId: "box-b-worker-7" } });
      expect(Date.parse(dead!.leaseExpiresAt!)).toBeLessThanOrEqual(Date.now());
    } finally {
      await worker.kill();
    }
  });
});
