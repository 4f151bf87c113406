import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { digestOf } from "../../src/events/index.js";
import { defineAgent, openReader, openRuntime } from "../../src/index.js";
import { RUN_MACHINE_VERSION } from "../../src/machines/index.js";
import { expectTwoLineError, runCli, useSharedDemoJournal, useTempDir } from "./cliProcess.js";

const tempDir = useTempDir();
const journal = useSharedDemoJournal(1);

interface RunJson {
  runId: string;
  chatId: string;
  agent: string;
  status: string;
  calls: number;
}

const demoJournal = (): { db: string; runId: string } => {
  const { db, runIds } = journal();
  return { db, runId: runIds[0]! };
};

describe("holdfast runs", () => {
  it("--json lists each run with its chat, agent, status and number of calls", async () => {
    const { db, runId } = demoJournal();
    const result = await runCli(["runs", "--db", db, "--json"]);
    expect(result.code).toBe(0);
    const runs = JSON.parse(result.stdout) as RunJson[];
    expect(runs).toEqual([
      expect.objectContaining({ runId, agent: "demo@1", status: "completed", calls: 6 }),
    ]);
  });

  it("--json gives every matching run, oldest first, past the index's page of 500; --limit gives one page, newest first", async () => {
    const db = join(tempDir(), "many.db");
    const runtime = await openRuntime({
      store: db,
      agents: [defineAgent({ name: "quick", version: "1", run: async () => "ok" })],
    });
    const submitted: string[] = [];
    try {
      for (let i = 0; i < 503; i++) {
        const handle = await runtime.submit({ chatId: `c${i}`, inputId: "1", agent: "quick", content: null });
        await handle.result;
        submitted.push(handle.runId);
      }
    } finally {
      await runtime.close();
    }
    const all = JSON.parse((await runCli(["runs", "--db", db, "--json"])).stdout) as RunJson[];
    expect(all.map((r) => r.runId)).toEqual(submitted);
    const page = JSON.parse(
      (await runCli(["runs", "--db", db, "--json", "--limit", "2"])).stdout,
    ) as RunJson[];
    expect(page.map((r) => r.runId)).toEqual(submitted.slice(-2).toReversed());
  });

  it("prints a table with one row per run", async () => {
    const { db, runId } = demoJournal();
    const result = await runCli(["runs", "--db", db]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      /run\s+│\s+chat\s+│\s+agent\s+│\s+status\s+│\s+owner\s+│\s+calls\s+│\s+updated/,
    );
    expect(result.stdout).toContain(runId);
  });

  it("--status keeps only runs with that status", async () => {
    const { db } = demoJournal();
    const completed = JSON.parse(
      (await runCli(["runs", "--db", db, "--status", "completed", "--json"])).stdout,
    );
    const held = JSON.parse((await runCli(["runs", "--db", db, "--status", "held", "--json"])).stdout);
    expect(completed).toHaveLength(1);
    expect(held).toEqual([]);
  });

  it("--chat, --agent, --id and a time range search the runs; a time that is not one is a usage error", async () => {
    const { db, runId } = demoJournal();
    const [run] = JSON.parse((await runCli(["runs", "--db", db, "--json"])).stdout) as Array<
      RunJson & { admittedAt: string }
    >;
    const ids = async (...args: string[]) =>
      (JSON.parse((await runCli(["runs", "--db", db, "--json", ...args])).stdout) as RunJson[]).map(
        (r) => r.runId,
      );
    expect(await ids("--chat", run!.chatId)).toEqual([runId]);
    expect(await ids("--chat", "no-such-chat")).toEqual([]);
    expect(await ids("--agent", "demo")).toEqual([runId]);
    expect(await ids("--agent", "demo@2")).toEqual([]);
    expect(await ids("--id", runId.slice(0, 4))).toEqual([runId]);
    expect(
      await ids("--from", run!.admittedAt, "--to", new Date(Date.parse(run!.admittedAt) + 1).toISOString()),
    ).toEqual([runId]);
    expect(await ids("--to", run!.admittedAt)).toEqual([]);
    const table = await runCli(["runs", "--db", db, "--chat", run!.chatId]);
    expect(table.stdout).toContain("1 of 1 run matching, the newest last");
    const wrong = await runCli(["runs", "--db", db, "--from", "soon"]);
    expect(wrong.code).toBe(2);
    expect(expectTwoLineError(wrong.stderr).reason).toContain('--from "soon" is not a time');
  });

  it("past 100 the counts read as more than 100: the runs, the held runs, the stalled runs", async () => {
    const db = join(tempDir(), "counts.db");
    const journal = LibsqlJournal.open(db);
    const admitted = (runId: string) => ({
      type: "run.admitted" as const,
      runId,
      chatId: `c-${runId}`,
      inputId: "i",
      inputDigest: "d".repeat(64),
      agent: { name: "a", version: "1" },
      machine: RUN_MACHINE_VERSION,
      input: null,
    });
    const ids = (prefix: string) => Array.from({ length: 101 }, (_, i) => `${prefix}${i}`);
    try {
      await journal.appendAll(
        ids("h").map((runId) => ({
          streamId: `run-${runId}`,
          expectedVersion: "no-stream" as const,
          events: [
            admitted(runId),
            {
              type: "call.intended" as const,
              runId,
              callId: `${runId}/0`,
              seq: 0,
              attempt: 1,
              kind: "tool" as const,
              name: "t",
              args: null,
              fingerprint: "d".repeat(64),
              disposition: "hold" as const,
              pin: null,
              reconciler: null,
              idempotencyKey: `${runId}/0#1`,
            },
            {
              type: "run.held" as const,
              runId,
              reasons: [{ code: "in-doubt" as const, callId: `${runId}/0`, detail: "no outcome" }],
            },
          ],
        })),
      );
      // Admitted, owned by no process: stalled.
      await journal.appendAll(
        ids("s").map((runId) => ({
          streamId: `run-${runId}`,
          expectedVersion: "no-stream" as const,
          events: [admitted(runId)],
        })),
      );
    } finally {
      await journal.close();
    }
    const result = await runCli(["runs", "--db", db, "--limit", "1"]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain("1 of more than 100 runs, the newest last");
    expect(result.stdout).toContain("more than 100 held runs wait for a person");
    expect(result.stdout).toContain("more than 100 runs are stalled");
  });

  it("an invalid --status is a usage error: exit 2, the allowed values, no stack trace", async () => {
    const { db } = demoJournal();
    const result = await runCli(["runs", "--db", db, "--status", "sleeping"]);
    expect(result.code).toBe(2);
    const { reason } = expectTwoLineError(result.stderr);
    expect(reason).toContain("sleeping");
    expect(reason).toContain("held");
  });
});

describe("holdfast show", () => {
  it("--json gives the run, its calls in order with committed outcomes, and its events", async () => {
    const { db, runId } = demoJournal();
    const result = await runCli(["show", runId, "--db", db, "--json"]);
    expect(result.code).toBe(0);
    const shown = JSON.parse(result.stdout) as {
      run: RunJson;
      calls: Array<{ seq: number; kind: string; name: string; status: string; outcomeCommitted: boolean }>;
      events: Array<{ streamId: string; type: string }>;
    };
    expect(shown.run).toMatchObject({ runId, status: "completed" });
    expect(shown.calls.map((call) => [call.seq, call.kind, call.name])).toEqual([
      [0, "model", "scripted-planner"],
      [1, "tool", "write_file"],
      [2, "tool", "shell"],
      [3, "tool", "shell"],
      [4, "tool", "notify"],
      [5, "tool", "write_file"],
    ]);
    expect(shown.calls.every((call) => call.status === "completed" && call.outcomeCommitted)).toBe(true);
    expect(shown.events.every((event) => event.streamId === `run-${runId}`)).toBe(true);
    expect(shown.events.at(-1)?.type).toBe("run.completed");
  });

  it("prints the run, a table of its calls with whether each outcome is committed, and its events", async () => {
    const { db, runId } = demoJournal();
    const result = await runCli(["show", runId, "--db", db]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`run ${runId}  completed`);
    expect(result.stdout).toMatch(/scripted-planner\s+│\s+1\s+│\s+completed\s+│\s+committed/);
    expect(result.stdout).toContain("run.completed");
  });

  it("a run whose events do not fold into calls (an outcome with no intent) is still shown, saying so", async () => {
    const db = join(tempDir(), "odd.db");
    const journal = LibsqlJournal.open(db);
    await journal.append({
      streamId: "run-r1",
      expectedVersion: "no-stream",
      events: [
        {
          type: "run.admitted",
          runId: "r1",
          chatId: "c",
          inputId: "i",
          inputDigest: "d".repeat(64),
          agent: { name: "a", version: "1" },
          machine: RUN_MACHINE_VERSION,
          input: null,
        },
        {
          type: "call.completed",
          runId: "r1",
          callId: "r1/0",
          attempt: 1,
          result: { ok: 0 },
          resultDigest: digestOf({ ok: 0 }),
        },
      ],
    });
    await journal.close();
    const text = await runCli(["show", "r1", "--db", db]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain("calls: not shown, the run's events do not fold into them");
    expect(text.stdout).toContain("call.completed");
    const json = await runCli(["show", "r1", "--db", db, "--json"]);
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({
      calls: [],
      callsProblem: expect.stringContaining("no intent"),
    });
    // A library reader gets a typed error naming the event, not the fold's internals.
    const reader = await openReader({ store: db });
    try {
      await expect(reader.calls("r1")).rejects.toMatchObject({
        _tag: "CallsDoNotFold",
        streamId: "run-r1",
        version: 2,
        eventType: "call.completed",
        callId: "r1/0",
        message: expect.stringContaining("run `holdfast audit`"),
      });
    } finally {
      await reader.close();
    }
  });

  it("a run that is not in the journal exits 1 and says how to list runs", async () => {
    const { db } = demoJournal();
    const result = await runCli(["show", "no-such-run", "--db", db]);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    expect(expectTwoLineError(result.stderr)).toEqual({
      reason: "run no-such-run is not in this journal",
      hint: "list runs with `holdfast runs`",
    });
  });
});

describe("holdfast show --chat", () => {
  const demoChat = async (): Promise<{ db: string; runId: string; chatId: string }> => {
    const { db, runId } = demoJournal();
    const runs = JSON.parse((await runCli(["runs", "--db", db, "--json"])).stdout) as RunJson[];
    return { db, runId, chatId: runs[0]!.chatId };
  };

  it("--json gives the chat's runs and its latest checkpoint: run, call, masked state, digest", async () => {
    const { db, runId, chatId } = await demoChat();
    const result = await runCli(["show", "--chat", chatId, "--db", db, "--json"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const shown = JSON.parse(result.stdout) as {
      chatId: string;
      lastRunId: string;
      runs: Array<{ runId: string; status: string }>;
      checkpoint: { runId: string; afterSeq: number; state: { plan: { items: Array<{ done: boolean }> } } };
    };
    expect(shown).toMatchObject({ chatId, lastRunId: runId, runs: [{ runId, status: "completed" }] });
    // The demo's last checkpoint follows its last call (seq 5), with every plan item done.
    expect(shown.checkpoint).toMatchObject({
      runId,
      afterSeq: 5,
      digest: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(shown.checkpoint.state.plan.items.every((item) => item.done)).toBe(true);
  });

  it("prints the chat, its runs and the checkpoint's state", async () => {
    const { db, runId, chatId } = await demoChat();
    const result = await runCli(["show", "--chat", chatId, "--db", db]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`chat ${chatId}`);
    expect(result.stdout).toMatch(new RegExp(`${runId}\\s+│\\s+\\S+\\s+│\\s+demo@1\\s+│\\s+completed`));
    expect(result.stdout).toContain(`checkpoint saved by run ${runId} after call ${runId}/5`);
    expect(result.stdout).toContain('"plan": {');
  });

  it("a chat that is not in the journal exits 1 and says how to find chats", async () => {
    const { db } = demoJournal();
    const result = await runCli(["show", "--chat", "no-such-chat", "--db", db]);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    expect(expectTwoLineError(result.stderr)).toEqual({
      reason: "chat no-such-chat is not in this journal",
      hint: "list runs and their chats with `holdfast runs`",
    });
  });

  it("a run id with --chat, or neither, is a usage error (exit 2)", async () => {
    const { db, runId, chatId } = await demoChat();
    const both = await runCli(["show", runId, "--chat", chatId, "--db", db]);
    expect(both.code).toBe(2);
    expect(expectTwoLineError(both.stderr).reason).toBe("show takes a run id or --chat, not both");
    const neither = await runCli(["show", "--db", db]);
    expect(neither.code).toBe(2);
    expect(expectTwoLineError(neither.stderr).reason).toBe("show needs a run id, or --chat <chatId>");
  });
});

describe("read-only commands", () => {
  it("on a journal path that does not exist exit 1, say so, and create nothing", async () => {
    const dir = tempDir();
    const db = join(dir, "missing.db");
    for (const args of [["runs"], ["show", "r1"], ["events"]]) {
      const result = await runCli([...args, "--db", db]);
      expect(result.code).toBe(1);
      const { reason, hint } = expectTwoLineError(result.stderr);
      expect(reason).toBe(`there is no journal at ${db}`);
      expect(hint).toContain("holdfast demo");
      expect(existsSync(db)).toBe(false);
    }
  });
});
