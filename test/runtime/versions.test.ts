import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/adapters/store.js";
import { type RecordedEvent, runStreamId } from "../../src/events/index.js";
import { openRuntime, type Runtime, type Server, serve, UnknownAgentVersion } from "../../src/index.js";
import { runCli } from "../cli/cliProcess.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { startScript } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { greeterVersion, step } from "../support/versions-worker.js";
import { witnessLines } from "../support/witness.js";

/*
 * Agent versions side by side (decisions 0062, 0063): a run re-executes with the version that
 * admitted it, new inputs take the newest, and a runtime without a run's version leaves it alone —
 * not executed on other code, not failed, nothing written — and readers say `agent-version-missing`.
 */

const VERSIONS_WORKER = join(import.meta.dirname, "..", "support", "versions-worker.ts");

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

const engines: ReadonlyArray<readonly [string, () => Promise<string>]> = [
  ["libSQL", async () => join(tempDir(), "journal.db")],
  [
    "PostgreSQL",
    async () => {
      await requirePg();
      return pgUrl(schemas.fresh());
    },
  ],
];

const v1 = greeterVersion("1");
const v2 = greeterVersion("2");

const open = (
  store: string,
  agents = [v1, v2],
  extra: { readonly onOpen?: boolean } = {},
): Promise<Runtime> =>
  openRuntime({
    store,
    agents,
    tools: [step],
    tracing: false,
    recovery: { leaseMs: 3_000, ...(extra.onOpen === false ? { onOpen: false } : {}) },
  });

/** A process with `versions` that admits `runs` (`<chat>:<version>:<hang|sleep>`), each hanging or parked; then SIGKILLed. */
const admitAndKill = async (
  store: string,
  witness: string,
  runs: string,
  versions = "1,2",
  sleepMs = 1_000,
): Promise<Record<string, string>> => {
  const worker = startScript(VERSIONS_WORKER, {
    HF_DB: store,
    HF_WITNESS: witness,
    HF_VERSIONS: versions,
    HF_MODE: "submit",
    HF_RUNS: runs,
    HF_SLEEP_MS: String(sleepMs),
  });
  try {
    await worker.waitFor("ready");
    return worker.lines.find((l) => l.kind === "ready")!.runs as Record<string, string>;
  } finally {
    await worker.kill();
  }
};

/** Poll until the run is in one of `statuses` (its projection row), up to `ms`. */
const until = async (runtime: Runtime, runId: string, statuses: string[], ms = 20_000) => {
  const deadline = Date.now() + ms;
  for (;;) {
    const row = await runtime.run(runId);
    if (row && statuses.includes(row.status)) return row;
    if (Date.now() > deadline) throw new Error(`run ${runId} is ${row?.status}, not ${statuses.join("/")}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

const streamOf = async (store: string, runId: string): Promise<ReadonlyArray<RecordedEvent>> => {
  const journal = await openStore(store);
  try {
    return await journal.readStream(runStreamId(runId));
  } finally {
    await journal.close();
  }
};

const api = async (store: string) => {
  const server: Server = await serve({ store, port: 0, tokenFile: join(tempDir(), "token") });
  const request = (path: string) =>
    server.app.request(path, {
      headers: { host: `127.0.0.1:${server.port}`, authorization: `Bearer ${server.token.token}` },
    });
  /** A page of the panel, signed in as a browser would be (on the panel's own host). */
  const page = async (path: string): Promise<string> => {
    const panelHost = new URL(server.panelUrl).host;
    const login = await server.app.request("/login", {
      method: "POST",
      headers: {
        host: panelHost,
        origin: `http://${panelHost}`,
        "content-type": "application/x-www-form-urlencoded",
      },
      body: new URLSearchParams({ token: server.token.token, name: "ada" }).toString(),
    });
    const cookie = login.headers.get("set-cookie")?.split(";")[0] ?? "";
    return (await server.app.request(path, { headers: { host: panelHost, cookie } })).text();
  };
  return { server, request, page, close: () => server.close() };
};

describe.each(engines)("agent versions side by side (%s)", (_engine, storeOf) => {
  it("a run admitted by v1 and SIGKILLed mid-run re-executes on v1 while new inputs take v2 in the same runtime", async () => {
    const store = await storeOf();
    const witness = join(tempDir(), "witness.txt");
    process.env.HF_WITNESS = witness;
    const runs = await admitAndKill(store, witness, "old:1:hang", "1");
    expect(witnessLines(witness)).toEqual(["v1:old:a"]);
    // v1 and v2 together, v2 registered last: the newest.
    const runtime = await open(store, [v1, v2]);
    try {
      expect(runtime.recovery.resumed).toContain(runs.old);
      expect(await runtime.wait(runs.old!)).toMatchObject({ status: "completed", output: { version: "1" } });
      expect((await runtime.run(runs.old!))?.agent).toBe("greeter@1");

      const fresh = await runtime.submit({
        chatId: "new",
        inputId: "i",
        agent: "greeter",
        content: { how: "plain" },
      });
      expect(await fresh.result).toMatchObject({ status: "completed", output: { version: "2" } });
      expect((await runtime.run(fresh.runId))?.agent).toBe("greeter@2");

      // A submit may name the version; the same ids name the same run (law 6), another version is a conflict.
      const named = await runtime.submit({
        chatId: "named",
        inputId: "i",
        agent: "greeter",
        agentVersion: "1",
        content: { how: "plain" },
      });
      expect(await named.result).toMatchObject({ status: "completed", output: { version: "1" } });
      const again = await runtime.submit({
        chatId: "named",
        inputId: "i",
        agent: "greeter",
        content: { how: "plain" },
      });
      expect(again).toMatchObject({ runId: named.runId, reused: true });
      await expect(
        runtime.submit({
          chatId: "named",
          inputId: "i",
          agent: "greeter",
          agentVersion: "2",
          content: { how: "plain" },
        }),
      ).rejects.toThrow(/for agent greeter@1/);

      const unknown = runtime.submit({
        chatId: "x",
        inputId: "i",
        agent: "greeter",
        agentVersion: "3",
        content: { how: "plain" },
      });
      await expect(unknown).rejects.toBeInstanceOf(UnknownAgentVersion);
      await expect(unknown).rejects.toThrow(
        'agent "greeter" has no version "3" in this runtime (registered versions: 1, 2)',
      );

      expect(witnessLines(witness)).toEqual([
        "v1:old:a",
        "v1:old:b",
        "v2:new:a",
        "v2:new:b",
        "v1:named:a",
        "v1:named:b",
      ]);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  }, 60_000);

  it("the same name@version twice is refused at open, with the versions registered", async () => {
    await expect(open(await storeOf(), [v1, v2, greeterVersion("1")])).rejects.toThrow(
      'agent "greeter@1" is registered twice; each version of an agent is registered once (registered versions of "greeter": 1, 2)',
    );
  });

  it("a runtime with only v2 leaves v1's running and sleeping runs alone and reports agent-version-missing; a runtime with v1 then finishes them", async () => {
    const store = await storeOf();
    const witness = join(tempDir(), "witness.txt");
    process.env.HF_WITNESS = witness;
    const runs = await admitAndKill(store, witness, "killed:1:hang napping:1:sleep", "1", 500);
    const before = {
      killed: (await streamOf(store, runs.killed!)).length,
      napping: (await streamOf(store, runs.napping!)).length,
    };
    const onlyV2 = await open(store, [v2]);
    const server = await api(store);
    try {
      // Both are left alone: the killed run is not interrupted, the sleeping one not woken.
      expect(onlyV2.recovery.versionMissing.toSorted((a, b) => a.runId.localeCompare(b.runId))).toEqual(
        [runs.killed!, runs.napping!]
          .toSorted()
          .map((runId) => ({ runId, agent: "greeter@1", registered: ["2"] })),
      );
      expect(onlyV2.recovery.resumed).toEqual([]);
      // Past the sleep's due time, with the wake loop running: v2 does not wake v1's run.
      await new Promise((r) => setTimeout(r, 1_500));
      await onlyV2.recover();
      expect((await onlyV2.run(runs.killed!))?.status).toBe("running");
      expect((await onlyV2.run(runs.napping!))?.status).toBe("waiting");
      // Nothing written by a runtime that merely lacks the version.
      expect((await streamOf(store, runs.killed!)).length).toBe(before.killed);
      expect((await streamOf(store, runs.napping!)).length).toBe(before.napping);

      // Readers: `runs`, `show`, the API.
      const listed = await runCli(["runs", "--db", store, "--json"]);
      expect(listed.code, listed.stderr).toBe(0);
      const rows = JSON.parse(listed.stdout) as Array<Record<string, unknown>>;
      for (const runId of [runs.killed, runs.napping])
        expect(rows.find((r) => r.runId === runId)).toMatchObject({
          agent: "greeter@1",
          waitReason: "agent-version-missing",
          versionsLive: ["greeter@2"],
        });
      const table = await runCli(["runs", "--db", store]);
      expect(table.stdout).toContain("greeter@1");
      expect(table.stdout).toContain(
        "waiting — agent-version-missing: live runtimes have greeter@2, not greeter@1",
      );
      expect(table.stdout).toContain("2 runs wait for their agent's version (agent-version-missing)");
      const shown = await runCli(["show", runs.napping!, "--db", store]);
      expect(shown.stdout).toContain("agent-version-missing: the run was admitted by greeter@1");
      expect(shown.stdout).toContain('no runtime with agent "greeter@1" is live now (agent-version-missing');
      const view = (await (await server.request(`/api/runs/${runs.killed}`)).json()) as Record<string, never>;
      expect(view.run).toMatchObject({ waitReason: "agent-version-missing", versionsLive: ["greeter@2"] });
      expect(view.next).toMatchObject({ live: false, agent: "greeter@1" });
      const panel = await server.page(`/runs/${runs.napping}`);
      expect(panel).toContain("waiting — agent-version-missing");
      expect(panel).toContain("live runtimes have greeter@2, not greeter@1");
      expect(panel).toContain("<dt>agent</dt><dd>greeter@1</dd>");
    } finally {
      await server.close();
      await onlyV2.close();
    }

    const withV1 = await open(store, [v1]);
    try {
      expect(withV1.recovery.resumed).toContain(runs.killed);
      expect(await withV1.wait(runs.killed!)).toMatchObject({
        status: "completed",
        output: { version: "1" },
      });
      await until(withV1, runs.napping!, ["completed"]);
      expect(await withV1.wait(runs.napping!)).toMatchObject({
        status: "completed",
        output: { version: "1" },
      });
      expect(witnessLines(witness).toSorted()).toEqual(
        ["v1:killed:a", "v1:killed:b", "v1:napping:a", "v1:napping:b"].toSorted(),
      );
      expect((await withV1.audit()).findings).toEqual([]);
    } finally {
      await withV1.close();
    }
  }, 90_000);

  it("a held v1 run decided through a v2-only runtime is not executed there; readers and what happens next say agent-version-missing; v1 finishes it", async () => {
    const store = await storeOf();
    const witness = join(tempDir(), "witness.txt");
    process.env.HF_WITNESS = witness;
    const runs = await admitAndKill(store, witness, "held:1:hold", "1");
    const runId = runs.held!;
    // A runtime with v1 recovers it: the model call is in doubt and holds the run.
    const first = await open(store, [v1]);
    await first.close();
    const onlyV2 = await open(store, [v2]);
    try {
      const row = await onlyV2.run(runId);
      expect(row).toMatchObject({ status: "held", agent: "greeter@1" });
      const outcome = await onlyV2.decide(runId, {
        basedOnVersion: row!.version,
        decidedBy: "ada",
        decision: "confirmed-not-completed",
        note: "the model call did not answer",
      });
      // Decided here, but not continued here: v2 is not the run's code.
      expect(onlyV2.executing).toBe(0);
      await new Promise((r) => setTimeout(r, 300));
      expect((await onlyV2.run(runId))?.status).toBe("running");
      expect(outcome).toMatchObject({ runId });
      const shown = await runCli(["show", runId, "--db", store, "--json"]);
      const view = JSON.parse(shown.stdout) as { run: Record<string, unknown>; next: { text: string } };
      expect(view.run).toMatchObject({ waitReason: "agent-version-missing", versionsLive: ["greeter@2"] });
      expect(view.next.text).toContain(
        'no runtime with agent "greeter@1" is live now (agent-version-missing: live runtimes have greeter@2 and leave it alone)',
      );
    } finally {
      await onlyV2.close();
    }
    expect(witnessLines(witness)).toEqual(["v1:held:a"]);
    const withV1 = await open(store, [v1]);
    try {
      expect(await withV1.wait(runId)).toMatchObject({ status: "completed", output: { version: "1" } });
      expect(witnessLines(witness)).toEqual(["v1:held:a", "v1:held:b"]);
    } finally {
      await withV1.close();
    }
  }, 60_000);

  it("a queued input takes the newest version of the runtime that admits it, unless its submit named one", async () => {
    const store = await storeOf();
    process.env.HF_WITNESS = join(tempDir(), "witness.txt");
    const runtime = await open(store, [v1, v2]);
    try {
      const first = await runtime.submit({
        chatId: "c",
        inputId: "1",
        agent: "greeter",
        content: { how: "sleep", ms: 300 },
      });
      const pinned = await runtime.submit({
        chatId: "c",
        inputId: "2",
        agent: "greeter",
        agentVersion: "1",
        content: { how: "plain" },
        whenBusy: "queue",
      });
      const newest = await runtime.submit({
        chatId: "c",
        inputId: "3",
        agent: "greeter",
        content: { how: "plain" },
        whenBusy: "queue",
      });
      expect(pinned.queued && newest.queued).toBe(true);
      await until(runtime, first.runId, ["completed"]);
      const outputs: unknown[] = [];
      for (const handle of [pinned, newest]) {
        if (!handle.queued) throw new Error("admitted at once");
        const result = await handle.result;
        outputs.push(result.status === "completed" ? result.output : result.status);
      }
      expect(outputs).toEqual([{ version: "1" }, { version: "2" }]);
    } finally {
      await runtime.close();
    }
  }, 60_000);
});

describe("agent versions on PostgreSQL with two workers", () => {
  it("a worker with v1 only and a worker with v2 only each claim, recover and wake only their own version's runs", async () => {
    await requirePg();
    const store = pgUrl(schemas.fresh());
    const witness = join(tempDir(), "witness.txt");
    const runs = await admitAndKill(
      store,
      witness,
      "k1:1:hang k2:2:hang s1:1:sleep s2:2:sleep",
      "1,2",
      2_000,
    );
    const workers = ["1", "2"].map((versions) =>
      startScript(VERSIONS_WORKER, {
        HF_DB: store,
        HF_WITNESS: witness,
        HF_VERSIONS: versions,
        HF_MODE: "serve",
        HF_PASS_MS: "500",
      }),
    );
    const auditor = await open(store, [], { onOpen: false });
    try {
      await Promise.all(workers.map((w) => w.waitFor("open")));
      const ids = workers.map((w) => String(w.lines.find((l) => l.kind === "open")!.workerId));
      for (const runId of Object.values(runs)) await until(auditor, runId, ["completed"], 30_000);
      for (const [chat, runId] of Object.entries(runs)) {
        const version = chat.endsWith("1") ? "1" : "2";
        const mine = ids[Number(version) - 1]!;
        const events = (await streamOf(store, runId)).map((e) => e.event);
        expect(events.at(-1)).toMatchObject({ type: "run.completed" });
        expect((await auditor.wait(runId)) as unknown).toMatchObject({ output: { version } });
        // Every take-over and every wake of the run is by the worker with its version.
        const by = events.flatMap((e) =>
          e.type === "run.claimed" ? [e.workerId] : e.type === "run.woken" ? [e.by] : [],
        );
        expect(by.length).toBeGreaterThan(0);
        expect(new Set(by)).toEqual(new Set([mine]));
      }
      expect(
        witnessLines(witness)
          .filter((l) => l.endsWith(":b"))
          .toSorted(),
      ).toEqual(["v1:k1:b", "v1:s1:b", "v2:k2:b", "v2:s2:b"].toSorted());
      expect((await auditor.audit()).findings).toEqual([]);
    } finally {
      await Promise.all(workers.map((w) => w.kill()));
      await auditor.close();
    }
  }, 90_000);
});
