import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { byteScan } from "../../torture/byteScan.js";
import { parseJsonLines, runCli, useTempDir } from "./cliProcess.js";

const tempDir = useTempDir();
const RAW_SECRET = "demo-secret-value-1234";

describe("holdfast demo", () => {
  it("completes, exits 0, labels the scripted planner and shows the API key only masked", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const result = await runCli(["demo", "--db", db]);

    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("scripted planner — stands in for a language model");
    expect(result.stdout).toMatch(/run \S+ started/);
    expect(result.stdout).toContain("result completed");
    expect(result.stdout).toContain("«secret:DEMO_API_KEY»");
    expect(result.stdout).not.toContain(RAW_SECRET);
    expect(result.stdout).toContain("what to try next");
    // The byte scan: journal, WAL, SHM, anchor, the work folder and its receipts.
    expect(readdirSync(dir)).toEqual(expect.arrayContaining(["journal.db", "demo-work"]));
    expect(byteScan([dir], { DEMO_API_KEY: RAW_SECRET })).toEqual([]);
  });

  it("prints every journaled event of its run, intent before outcome", async () => {
    const result = await runCli(["demo", "--db", join(tempDir(), "journal.db"), "--json"]);
    expect(result.code).toBe(0);
    const doc = JSON.parse(result.stdout) as {
      runId: string;
      result: { status: string };
      events: Array<{ type: string; version: number; streamId: string }>;
    };
    expect(doc.result.status).toBe("completed");
    const types = doc.events.map((e) => e.type);
    expect(types[0]).toBe("run.admitted");
    expect(types.at(-1)).toBe("run.completed");
    expect(types.filter((t) => t === "call.intended")).toHaveLength(6);
    expect(types.filter((t) => t === "call.completed")).toHaveLength(6);
    expect(types.filter((t) => t === "checkpoint.saved")).toHaveLength(5);
    expect(doc.events.map((e) => e.version)).toEqual(doc.events.map((_, i) => i + 1));
    expect(new Set(doc.events.map((e) => e.streamId))).toEqual(new Set([`run-${doc.runId}`]));
    expect(result.stdout).not.toContain(RAW_SECRET);
  });

  it("writes notes.md and a finished plan.json in the work folder, readable by the owner only", async () => {
    const dir = tempDir();
    const work = join(dir, "work");
    const result = await runCli(["demo", "--db", join(dir, "journal.db"), "--work", work]);
    expect(result.code).toBe(0);
    expect(readFileSync(join(work, "notes.md"), "utf8")).toContain("# Notes: durable agent runs");
    const plan = JSON.parse(readFileSync(join(work, "plan.json"), "utf8")) as {
      items: Array<{ done: boolean }>;
    };
    expect(plan.items.length).toBeGreaterThan(0);
    expect(plan.items.every((item) => item.done)).toBe(true);
    for (const file of ["notes.md", "plan.json"]) {
      expect(statSync(join(work, file)).mode & 0o777).toBe(0o600);
    }
  });

  it("runs again on the same journal as a new run in a new chat", async () => {
    const db = join(tempDir(), "journal.db");
    expect((await runCli(["demo", "--db", db])).code).toBe(0);
    expect((await runCli(["demo", "--db", db])).code).toBe(0);
    const runs = JSON.parse((await runCli(["runs", "--db", db, "--json"])).stdout) as Array<{
      chatId: string;
      status: string;
    }>;
    expect(runs).toHaveLength(2);
    expect(runs.every((run) => run.status === "completed")).toBe(true);
    expect(new Set(runs.map((run) => run.chatId)).size).toBe(2);
  });

  it("after a crash between a message going out and its outcome, the next demo holds that run instead of sending again", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const crashed = await runCli(["demo", "--db", db], {
      process: true,
      env: { HOLDFAST_CRASH_AT: "after-effect-before-outcome", HOLDFAST_CRASH_CALL: "notify" },
    });
    expect(crashed.signal).toBe("SIGKILL");

    const next = await runCli(["demo", "--db", db, "--json"]);
    expect(next.code).toBe(0);
    const doc = JSON.parse(next.stdout) as { recovery: { held: Array<{ runId: string }> } };
    expect(doc.recovery.held).toHaveLength(1);
    const runId = doc.recovery.held[0]!.runId;
    const shown = JSON.parse((await runCli(["show", runId, "--db", db, "--json"])).stdout) as {
      run: { heldReasons: Array<{ code: string; callId: string }> };
      calls: Array<{ seq: number; name: string; status: string; outcomeCommitted: boolean }>;
    };
    const notifyCall = shown.calls.find((call) => call.name === "notify")!;
    expect(notifyCall).toMatchObject({ status: "in-doubt", outcomeCommitted: false });
    expect(shown.run.heldReasons).toEqual([
      expect.objectContaining({ code: "in-doubt", callId: `${runId}/${notifyCall.seq}` }),
    ]);
    // The message went out once (the first demo) and was not sent again; the second demo sent its own.
    const outbox = readFileSync(join(dir, "demo-work", "outbox.txt"), "utf8")
      .trim()
      .split("\n");
    expect(outbox.filter((line) => line.endsWith(`${runId}/${notifyCall.seq}#1`))).toHaveLength(1);
    expect(outbox).toHaveLength(2);
  });

  it("the cancel that what-to-try-next suggests ends the crash experiment's held run: stopped, and a second cancel says it already ended", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const crashed = await runCli(["demo", "--db", db], {
      process: true,
      env: { HOLDFAST_CRASH_AT: "after-effect-before-outcome", HOLDFAST_CRASH_CALL: "notify" },
    });
    expect(crashed.signal).toBe("SIGKILL");
    const next = await runCli(["demo", "--db", db]);
    expect(next.code).toBe(0);
    expect(next.stdout).toContain(`npx holdfast cancel <runId> --by you --note "not needed" --db ${db}`);
    const runId = /held: (\S+) /.exec(next.stdout)?.[1];
    expect(runId).toBeDefined();
    // The demo ends by pointing at the held run and at the panel (walkthrough #7), and says the
    // count right (#18).
    expect(next.stdout).toContain("recovery found 1 interrupted run\n");
    expect(next.stdout).toContain("1 run is held in this journal, waiting for a person:");
    expect(next.stdout).toContain(`npx holdfast show ${runId} --db ${db}`);
    expect(next.stdout).toContain(`npx holdfast serve --db ${db}`);
    // A later demo lists the run again, as one held from before, not as a new interruption.
    const later = await runCli(["demo", "--db", db]);
    expect(later.stdout).toContain("recovery found 0 interrupted runs\n");
    expect(later.stdout).toContain(`still held from before: ${runId} `);

    const cancel = ["cancel", runId!, "--by", "you", "--note", "not needed", "--db", db];
    const first = await runCli([...cancel, "--json"]);
    expect(first.code).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ accepted: true, runId, status: "stopped" });
    const second = await runCli(cancel);
    expect(second.code).toBe(0);
    expect(second.stdout).toContain(`run ${runId} already ended (stopped)`);
  });

  it("after a crash right after a shell call's intent, the receipts prove it never ran: recovery reconciles it and runs it once", async () => {
    const db = join(tempDir(), "journal.db");
    const crashed = await runCli(["demo", "--db", db], {
      process: true,
      env: { HOLDFAST_CRASH_AT: "after-intent", HOLDFAST_CRASH_CALL: "shell" },
    });
    expect(crashed.signal).toBe("SIGKILL");
    const next = await runCli(["demo", "--db", db, "--json"]);
    expect(next.code).toBe(0);
    const doc = JSON.parse(next.stdout) as {
      recovery: { resumed: string[]; results: Array<{ status: string }> };
    };
    expect(doc.recovery.resumed).toHaveLength(1);
    expect(doc.recovery.results.map((r) => r.status)).toEqual(["completed"]);
    const events = (await runCli(["events", "--db", db, "--json"])).stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; payload: { outcome?: string } });
    expect(events.filter((e) => e.type === "call.reconciled").map((e) => e.payload.outcome)).toEqual([
      "not-completed",
    ]);
  });

  it("after a crash right after a shell call's outcome, the next demo resumes that run and does not repeat finished calls", async () => {
    const db = join(tempDir(), "journal.db");
    const crashed = await runCli(["demo", "--db", db, "--json"], {
      process: true,
      env: { HOLDFAST_CRASH_AT: "after-outcome", HOLDFAST_CRASH_CALL: "shell" },
    });
    expect(crashed.signal).toBe("SIGKILL");

    const next = await runCli(["demo", "--db", db, "--json"]);
    expect(next.code).toBe(0);
    const doc = JSON.parse(next.stdout) as {
      recovery: { resumed: string[]; results: Array<{ runId: string; status: string }> };
    };
    expect(doc.recovery.resumed).toHaveLength(1);
    const resumed = doc.recovery.resumed[0]!;
    expect(doc.recovery.results).toEqual([expect.objectContaining({ runId: resumed, status: "completed" })]);

    const events = parseJsonLines((await runCli(["events", "--db", db, "--json"])).stdout).filter(
      (e) => e.streamId === `run-${resumed}`,
    );
    const intents = events
      .filter((e) => e.type === "call.intended")
      .map((e) => (e.payload as { seq: number }).seq);
    expect(intents).toEqual([0, 1, 2, 3, 4, 5]);
    expect(events.map((e) => e.type)).toContain("run.resumed");
    // Nothing of the crashed run's shell call is left: no receipts, no secret anywhere.
    expect(readdirSync(join(dirname(db), "demo-work.receipts"))).toEqual([]);
    expect(byteScan([dirname(db)], { DEMO_API_KEY: RAW_SECRET })).toEqual([]);
  });
});
